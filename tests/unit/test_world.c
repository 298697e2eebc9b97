/* test_world.c - world discovery from Slurm's step variables and Open MPI's, and what is refused. */
#include <stdlib.h>
#include "core/error.h"
#include "dt_test.h"
#include "launch/world.h"

static const char *const vars[] = {"SLURM_JOB_ID",          "SLURM_STEP_ID",       "SLURM_PROCID",
                                   "SLURM_STEP_NUM_TASKS",  "SLURM_LOCALID",       "SLURM_NODEID",
                                   "SLURM_STEP_NUM_NODES",  "SLURM_STEP_TASKS_PER_NODE", "SLURM_RESTART_COUNT",
                                   "OMPI_COMM_WORLD_RANK",  "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                   "OMPI_COMM_WORLD_LOCAL_SIZE"};

static int clean(void **state)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    return dt_test_setup(state);
}

/* What srun sets for one task: rank, tasks, local id, node, nodes, tasks per node. */
static void slurm_task(const char *procid, const char *ntasks, const char *localid, const char *nodeid,
                       const char *nnodes, const char *per_node)
{
    setenv("SLURM_STEP_ID", "2", 1);
    setenv("SLURM_PROCID", procid, 1);
    setenv("SLURM_STEP_NUM_TASKS", ntasks, 1);
    setenv("SLURM_LOCALID", localid, 1);
    setenv("SLURM_NODEID", nodeid, 1);
    setenv("SLURM_STEP_NUM_NODES", nnodes, 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", per_node, 1);
}

static void slurm_step(void **state)
{
    /* rank 5 of -N3 -n6 packed as 4,1(x2): the last node's only task */
    setenv("SLURM_JOB_ID", "77", 1);
    setenv("SLURM_RESTART_COUNT", "1", 1);
    slurm_task("5", "6", "0", "2", "3", "4,1(x2)");
    struct dt_world w;
    assert_int_equal(dt_world_from_env(&w, true), DT_SUCCESS);
    char line[256];
    dt_world_describe(&w, line, sizeof line);
    assert_string_equal(line, "rank 5/6 (local 0/1, node 2/3) from slurm; Slurm job 77 step 2, restart 1");
    /* the same step with no PMIx: the tasks could not find each other */
    assert_int_equal(dt_world_from_env(&w, false), DT_ERR_COMM);
    assert_string_equal(dt_error_msg(), "dtrun: error: srun started 6 tasks without PMIx, so they cannot find each "
                                        "other (each would train alone)\n  hint: run `srun --mpi=pmix dtrun ...`, or "
                                        "set MpiDefault=pmix in slurm.conf; `srun --mpi=list` shows what this cluster "
                                        "has");
    setenv("SLURM_STEP_TASKS_PER_NODE", "4,1", 1);
    assert_int_equal(dt_world_from_env(&w, true), DT_ERR_COMM);
    assert_string_equal(dt_error_msg(), "dtrun: error: SLURM_STEP_TASKS_PER_NODE '4,1' does not describe 3 nodes\n"
                                        "  hint: start dtrun through srun");
}

static void one_task_step_needs_no_pmix(void **state)
{
    slurm_task("0", "1", "0", "0", "1", "1");
    struct dt_world w;
    assert_int_equal(dt_world_from_env(&w, false), DT_SUCCESS);
    assert_int_equal(w.source, DT_WORLD_SLURM);
    assert_int_equal(w.size, 1);
}

static void mpirun(void **state)
{
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    struct dt_world w;
    assert_int_equal(dt_world_from_env(&w, false), DT_SUCCESS);
    char line[256];
    dt_world_describe(&w, line, sizeof line);
    assert_string_equal(line, "rank 3/4 (local 1/2, node 1/2) from mpirun");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    assert_int_equal(dt_world_from_env(&w, false), DT_ERR_COMM);
}

static void single(void **state)
{
    struct dt_world w;
    assert_int_equal(dt_world_from_env(&w, false), DT_SUCCESS);
    assert_int_equal(w.source, DT_WORLD_SINGLE);
    assert_int_equal(w.rank, 0);
    assert_int_equal(w.size, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(slurm_step, clean, dt_test_teardown),
        cmocka_unit_test_setup_teardown(one_task_step_needs_no_pmix, clean, dt_test_teardown),
        cmocka_unit_test_setup_teardown(mpirun, clean, dt_test_teardown),
        cmocka_unit_test_setup_teardown(single, clean, dt_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
