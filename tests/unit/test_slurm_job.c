/* test_slurm_job.c - core/slurm_job.c's reading of scontrol, against a fake scontrol first on PATH
 * (a shell script that answers from a counter file): a job's state and flags; a failed query asked
 * once more, then reported with the first line that says something; an id Slurm does not know. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/slurm_job.h"
#include "dt_test.h"

static char dir[64], path_was[4096];

/* scontrol answering its first FAILS calls with a blank line and an error (exit 1), then ANSWER */
static void fake_scontrol(int fails, const char *answer)
{
    char p[128];
    snprintf(p, sizeof p, "%s/scontrol", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\nn=$(cat %s/calls 2>/dev/null || echo 0); echo $((n + 1)) > %s/calls\n"
               "if [ \"$n\" -lt %d ]; then printf '\\nslurm_load_jobs error: Socket timed out on send/recv operation\\n'; "
               "exit 1; fi\necho '%s'\n",
            dir, dir, fails, answer);
    fclose(f);
    chmod(p, 0755);
    snprintf(p, sizeof p, "%s/calls", dir);
    unlink(p);
}

static int calls(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/calls", dir);
    FILE *f = fopen(p, "r");
    int n = 0;
    if (f && fscanf(f, "%d", &n) != 1) n = -1;
    if (f) fclose(f);
    return n;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/dt-scontrol-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path_was, sizeof path_was, "%s", getenv("PATH"));
    char path[4200];
    snprintf(path, sizeof path, "%s:%s", dir, path_was);
    setenv("PATH", path, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    setenv("PATH", path_was, 1);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *const job7 = "JobId=7 JobName=train UserId=u(1) JobState=RUNNING Reason=None Requeue=1 Restarts=2 "
                                "BatchFlag=1 NodeList=n1";

/* job 7 read after FAILS failed queries: its state and flags, in CALLS calls of scontrol */
static void shows_job7(int fails, int calls_made)
{
    fake_scontrol(fails, job7);
    struct dt_slurm_job j;
    char why[256] = "";
    assert_true(dt_slurm_job_show("7", &j, why, sizeof why));
    assert_string_equal(j.state, "RUNNING");
    assert_true(j.requeue && j.batch);
    assert_int_equal(j.restarts, 2);
    assert_int_equal(calls(), calls_made);
}

static void state_and_flags(void **state)
{
    (void)state;
    shows_job7(0, 1);
}

static void a_failed_query_is_asked_again(void **state)
{
    (void)state;
    shows_job7(1, 2);
    /* failing twice: reported with the line that says why */
    fake_scontrol(2, job7);
    struct dt_slurm_job j;
    char why[256] = "";
    assert_false(dt_slurm_job_show("7", &j, why, sizeof why));
    assert_string_equal(why, "scontrol show job 7 (asked twice): slurm_load_jobs error: Socket timed out on send/recv "
                             "operation");
    assert_int_equal(calls(), 2);
}

static void unknown_and_invalid_ids(void **state)
{
    (void)state;
    fake_scontrol(0, "slurm_load_jobs error: Invalid job id specified");
    struct dt_slurm_job j;
    char why[256] = "";
    assert_true(dt_slurm_job_show("9", &j, why, sizeof why));
    assert_string_equal(j.state, "unknown to Slurm");
    assert_false(dt_slurm_job_show("9;rm", &j, why, sizeof why));
    assert_string_equal(why, "'9;rm' is not a Slurm job id");
    assert_int_equal(calls(), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(state_and_flags), cmocka_unit_test(a_failed_query_is_asked_again),
                                       cmocka_unit_test(unknown_and_invalid_ids)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
