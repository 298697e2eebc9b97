/* test_alloc.c - Slurm's compressed per-node counts and the allocation geometry. */
#include <stdlib.h>
#include "dt_test.h"
#include "launch/alloc.h"

static void counts(void **state)
{
    int out[8];
    assert_int_equal(dt_slurm_counts_parse("2(x3),1", out, 8), 4);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[2], 2);
    assert_int_equal(out[3], 1);
    assert_int_equal(dt_slurm_counts_parse("4,1(x2)", out, 8), 3);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[2], 1);
    assert_int_equal(dt_slurm_counts_parse("8", out, 8), 1);
    assert_int_equal(out[0], 8);
    assert_int_equal(dt_slurm_counts_parse("2(3)", out, 8), -1);
    assert_int_equal(dt_slurm_counts_parse("2(x)", out, 8), -1);
    assert_int_equal(dt_slurm_counts_parse("a", out, 8), -1);
    assert_int_equal(dt_slurm_counts_parse("2,,", out, 8), -1);
}

static void geometry_from_env(void **state)
{
    setenv("SLURM_JOB_NUM_NODES", "3", 1);
    setenv("SLURM_TASKS_PER_NODE", "4(x3)", 1);
    setenv("SLURM_JOB_ID", "77", 1);
    struct dt_geometry geo = {0};
    dt_alloc_geometry(&geo);
    assert_int_equal(geo.nodes, 3);
    assert_int_equal(geo.tasks_per_node, 4);
    assert_string_equal(geo.source, "Slurm job 77: 3 nodes, 4(x3) tasks per node");

    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, &geo, NULL, NULL), DT_SUCCESS);
    assert_int_equal(cfg.resolved.world, 12);
    assert_int_equal(cfg.resolved.strategy, DT_STRAT_DDP);
    assert_int_equal(cfg.resolved.global_batch, 96);
    assert_string_equal(dt_config_origin(&cfg, "compute.num_nodes")->note, "Slurm job 77: 3 nodes, 4(x3) tasks per node");
    dt_config_free(&cfg);
    unsetenv("SLURM_JOB_NUM_NODES");
    unsetenv("SLURM_TASKS_PER_NODE");
    dt_alloc_geometry(&geo);
    assert_int_equal(geo.nodes, 0);
}

DT_TESTS(T(counts), T(geometry_from_env))
