/* test_spank.c - the SPANK plugin's pure parts: the admin's plugstack.conf arguments, the webhook
 * allow-list and URL hosts, the task_failed record (valid JSON against what the schema requires)
 * and which task ends it reports, the OOM counter, Slurm time limits (dtrun submit). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/timestr.h"
#include "dt_test.h"
#include "events/json.h"
#include "events/webhook_allow.h"
#include "spank/site.h"
#include "spank/task_failed.h"

static int parse(struct dt_spank_site *s, char *err, const char *a, const char *b)
{
    char *argv[2] = {(char *)a, (char *)b};
    return dt_spank_site_parse(s, "/usr/bin/dtrun", (a != NULL) + (b != NULL), argv, err, 512);
}

static void site_defaults_and_keys(void **state)
{
    struct dt_spank_site s;
    char err[512];
    assert_int_equal(parse(&s, err, NULL, NULL), 0);
    assert_string_equal(s.dtrun, "/usr/bin/dtrun");
    assert_true(s.gpu_bind && s.nccl_user_override);
    assert_true(s.timeout == 2);
    assert_int_equal(parse(&s, err, "webhook_allow=a.org,*.b.org", "task_failed_timeout=0.5"), 0);
    assert_string_equal(s.allow, "a.org,*.b.org");
    assert_true(s.timeout == 0.5);
    assert_int_equal(parse(&s, err, "NCCL_IB_HCA=mlx5_0", "NCCL_IB_HCA=mlx5_1"), 0);
    assert_int_equal(s.nenv, 1); /* the later one wins */
    assert_string_equal(s.env[0][1], "mlx5_1");
    assert_int_equal(parse(&s, err, "gpu_bind=none", "nccl_user_override=no"), 0);
    assert_false(s.gpu_bind || s.nccl_user_override);
}

static void site_errors(void **state)
{
    struct dt_spank_site s;
    char err[512];
    assert_int_equal(parse(&s, err, "colour=blue", NULL), -1);
    assert_string_equal(err, "unknown argument 'colour' (accepted: dtrun=PATH, webhook=URL, webhook_allow=HOST[,HOST...], "
                             "webhook_secret_file=PATH, task_failed_timeout=SECONDS, gpu_bind=auto|none, "
                             "nccl_user_override=yes|no, NCCL_*=VALUE)");
    assert_int_equal(parse(&s, err, "verbose", NULL), -1);
    assert_true(strstr(err, "'verbose' is not key=value") == err);
    assert_int_equal(parse(&s, err, "dtrun=bin/dtrun", NULL), -1);
    assert_string_equal(err, "dtrun=bin/dtrun: give the absolute path of the dtrun program");
    assert_int_equal(parse(&s, err, "webhook=ftp://h/x", NULL), -1);
    assert_string_equal(err, "webhook=ftp://h/x: give an http:// or https:// URL");
    assert_int_equal(parse(&s, err, "task_failed_timeout=0", NULL), -1);
    assert_int_equal(parse(&s, err, "task_failed_timeout=nan", NULL), -1);
    assert_string_equal(err, "task_failed_timeout=nan: give seconds, more than 0 and at most 60");
    assert_int_equal(parse(&s, err, "gpu_bind=yes", NULL), -1);
    assert_string_equal(err, "gpu_bind=yes: give auto or none");
    assert_int_equal(parse(&s, err, "=x", NULL), -1);
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, "webhook_allow=", 14);
    assert_int_equal(parse(&s, err, big, NULL), -1);
    assert_string_equal(err, "webhook_allow= is longer than 1023 bytes");
}

static void url_hosts(void **state)
{
    char h[256];
    assert_true(dt_url_host("https://user:pw@Hooks.Example.org:8443/run?x=1", h, sizeof h));
    assert_string_equal(h, "hooks.example.org");
    assert_true(dt_url_host("http://[::1]:80/x", h, sizeof h));
    assert_string_equal(h, "::1");
    assert_true(dt_url_host("http://a@b@c.org/", h, sizeof h)); /* the last @ ends the userinfo */
    assert_string_equal(h, "c.org");
    assert_false(dt_url_host("hooks.example.org/x", h, sizeof h));
    assert_false(dt_url_host("http:///x", h, sizeof h));
    assert_false(dt_url_host("http://[::1/x", h, sizeof h));
    assert_false(dt_url_host("1http://x", h, sizeof h));
}

static void allow_list(void **state)
{
    assert_true(dt_host_allowed("hooks.example.org", "a.org, hooks.example.org"));
    assert_true(dt_host_allowed("HOOKS.example.org", "hooks.example.org"));
    assert_true(dt_host_allowed("x.b.org", "*.b.org"));
    assert_true(dt_host_allowed("b.org", ".b.org"));
    assert_false(dt_host_allowed("evilb.org", "*.b.org"));
    assert_false(dt_host_allowed("b.org.evil", "b.org"));
    assert_false(dt_host_allowed("hooks.example.org", "example.org"));
    assert_true(dt_host_allowed("anything", "*"));
    assert_false(dt_host_allowed("anything", ""));
}

static void task_failed_record(void **state)
{
    struct dt_task_end e = {.job = 17, .step = 0, .restart = 2, .node = "n2", .run_name = "r\"1", .task = 3,
                            .local_task = 1, .node_rank = 1, .pid = 4242, .status = SIGKILL, .oom = 1};
    char *j = dt_task_failed_json(&e, 1700000000.25);
    assert_non_null(j);
    assert_true(dt_json_valid(j, strlen(j)));
    assert_string_equal(j, "{\"schema_version\":1,\"id\":\"slurm-17-2.0-t3\",\"type\":\"task_failed\","
                           "\"time\":\"2023-11-14T22:13:20.250Z\",\"run_name\":\"r\\\"1\",\"job_id\":\"17\","
                           "\"step_id\":\"0\",\"restart_count\":2,\"node\":\"n2\",\"node_rank\":1,\"rank\":3,"
                           "\"local_rank\":1,\"pid\":4242,\"signal\":\"SIGKILL\",\"signal_number\":9,"
                           "\"exit_status\":null,\"core_dumped\":false,\"oom_killed\":true}");
    free(j);
    e.status = 3 << 8, e.oom = -1, e.run_name = NULL;
    j = dt_task_failed_json(&e, 0);
    assert_true(strstr(j, "\"run_name\":null,") && strstr(j, "\"signal\":null,\"signal_number\":null,\"exit_status\":3,"));
    assert_true(strstr(j, "\"oom_killed\":null}"));
    free(j);
}

static void which_ends(void **state)
{
    assert_true(dt_task_failed_wanted(SIGKILL, true));   /* killed: dtrun could not say */
    assert_false(dt_task_failed_wanted(2 << 8, true));   /* dtrun's own error: it reports it */
    assert_true(dt_task_failed_wanted(2 << 8, false));   /* another program's */
    assert_false(dt_task_failed_wanted(0, false));
}

static void oom_counter(void **state)
{
    dt_test_write("memory.events", "low 0\nhigh 0\nmax 3\noom 2\noom_kill 1\noom_group_kill 0\n");
    assert_int_equal(dt_oom_kills("."), 1);
    assert_int_equal(dt_oom_kills("./nosuch"), -1);
}

static void slurm_times(void **state)
{
    long s;
    assert_int_equal(dt_slurm_time_parse("90", &s), 0), assert_int_equal(s, 5400);
    assert_int_equal(dt_slurm_time_parse("90:30", &s), 0), assert_int_equal(s, 5430);
    assert_int_equal(dt_slurm_time_parse("04:00:00", &s), 0), assert_int_equal(s, 14400);
    assert_int_equal(dt_slurm_time_parse("1-12", &s), 0), assert_int_equal(s, 129600);
    assert_int_equal(dt_slurm_time_parse("1-12:30", &s), 0), assert_int_equal(s, 131400);
    assert_int_equal(dt_slurm_time_parse("2-00:00:01", &s), 0), assert_int_equal(s, 172801);
    assert_int_equal(dt_slurm_time_parse("UNLIMITED", &s), 0), assert_int_equal(s, -1);
    const char *bad[] = {"", "4 hours", "1:2:3:4", "-1", "1-", "1-2:3:4:5", "a", "1:", ":1", "1--2", "12345678901"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(dt_slurm_time_parse(bad[i], &s), -1);
}

DT_TESTS(T(site_defaults_and_keys), T(site_errors), T(url_hosts), T(allow_list), T(task_failed_record), T(which_ends),
         T(oom_counter), T(slurm_times))
