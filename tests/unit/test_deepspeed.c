/* test_deepspeed.c - the DeepSpeed JSON: "auto" filling, mismatches, the batch identity, precision. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/schema.h"
#include "core/error.h"
#include "dt_test.h"

static struct dt_geometry two = {.tasks_per_node = 2, .nodes = 1, .source = "test: 1 node x 2"};

/* the YAML names ds.json; the JSON text is written beside it */
static dt_status_t with_json(struct dt_config *cfg, const char *json, const char *yaml_extra, char **warnings)
{
    dt_test_write("ds.json", json);
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "compute:\n  strategy: deepspeed\n  strategy_config: {config: ds.json}\n%s",
             yaml_extra ? yaml_extra : "");
    dt_test_stderr_begin();
    dt_status_t rc = dt_test_config(cfg, &two, yaml, NULL);
    char *w = dt_test_stderr_end();
    if (warnings) *warnings = w;
    else free(w);
    return rc;
}

static void autos_take_dtrun_values(void **state)
{
    struct dt_config cfg;
    const char *json = "{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": \"auto\",\n"
                       " \"gradient_accumulation_steps\": \"auto\", \"gradient_clipping\": \"auto\",\n"
                       " \"fp16\": {\"enabled\": \"auto\"}, \"bf16\": {\"enabled\": \"auto\"},\n"
                       " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\", \"betas\": \"auto\"}},\n"
                       " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": \"auto\"}}}";
    assert_int_equal(with_json(&cfg, json,
                               "  precision: 16-mixed\n  gradient_accumulation_steps: 3\n"
                               "data: {micro_batch_size: 4}\nscheduler: {warmup: 40ba}\n",
                               NULL),
                     DT_SUCCESS);
    assert_int_equal(cfg.ds.train_batch_size, 4 * 3 * 2);
    assert_int_equal(cfg.ds.train_micro_batch_size_per_gpu, 4);
    assert_int_equal(cfg.ds.gradient_accumulation_steps, 3);
    assert_true(cfg.ds.fp16.enabled);
    assert_false(cfg.ds.bf16.enabled);
    assert_true(cfg.ds.optimizer.params.lr == cfg.optimizer.lr);
    assert_int_equal(cfg.ds.scheduler.params.warmup_num_steps, 40);
    assert_int_equal(cfg.scheduler.type, DT_SCHED_WARMUP_LR);
    assert_int_equal(dt_config_origin(&cfg, "scheduler.type")->kind, DT_ORIGIN_DEEPSPEED);
    assert_int_equal(cfg.resolved.strategy, DT_STRAT_DDP);
    assert_int_equal(cfg.resolved.global_batch, 24);
    dt_config_free(&cfg);
}

static void explicit_json_fills_defaults(void **state)
{
    struct dt_config cfg;
    assert_int_equal(with_json(&cfg,
                               "{\"train_micro_batch_size_per_gpu\": 4, \"gradient_accumulation_steps\": 2,\n"
                               " \"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": 2e8},\n"
                               " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001}}}",
                               NULL, NULL),
                     DT_SUCCESS);
    assert_int_equal(cfg.data.micro_batch_size, 4);
    assert_int_equal(cfg.compute.gradient_accumulation_steps, 2);
    assert_int_equal(dt_config_origin(&cfg, "data.micro_batch_size")->kind, DT_ORIGIN_DEEPSPEED);
    assert_int_equal(dt_config_origin(&cfg, "data.micro_batch_size")->loc.line, 1);
    assert_int_equal(dt_config_origin(&cfg, "data.micro_batch_size")->loc.col, 36);
    assert_true(cfg.compute.strategy_config.bucket_cap_mb == 2e8 * 4 / (1 << 20));
    /* DeepSpeed's Adam is AdamW unless adam_w_mode is false */
    assert_int_equal(cfg.optimizer.type, DT_OPTIM_ADAMW);
    assert_true(cfg.optimizer.lr == 0.001);
    assert_int_equal(cfg.resolved.strategy, DT_STRAT_ZERO2);
    dt_config_free(&cfg);
    assert_int_equal(with_json(&cfg, "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"adam_w_mode\": false}}}",
                               NULL, NULL),
                     DT_SUCCESS);
    assert_int_equal(cfg.optimizer.type, DT_OPTIM_ADAM);
    dt_config_free(&cfg);
}

static void mismatches_reported_together(void **state)
{
    struct dt_config cfg;
    assert_int_equal(with_json(&cfg,
                               "{\"train_micro_batch_size_per_gpu\": 4,\n \"gradient_accumulation_steps\": 3,\n"
                               " \"gradient_clipping\": 0.5}",
                               "  gradient_accumulation_steps: 2\n  gradient_clipping: 1.0\ndata: {micro_batch_size: 8}\n",
                               NULL),
                     DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(),
                        "ds.json: error: the DeepSpeed config disagrees with the dtrun config in 3 places:\n"
                        "  gradient_clipping = 0.5 (ds.json:3:23) but compute.gradient_clipping = 1.0 (t.yaml:5:22)\n"
                        "  train_micro_batch_size_per_gpu = 4 (ds.json:1:36) but data.micro_batch_size = 8 (t.yaml:6:26)\n"
                        "  gradient_accumulation_steps = 3 (ds.json:2:33) but compute.gradient_accumulation_steps = 2 "
                        "(t.yaml:4:32)\n"
                        "  hint: set these DeepSpeed values to \"auto\" so they follow the dtrun config, or make both "
                        "sides equal");
    dt_config_free(&cfg);
}

static void batch_identity(void **state)
{
    struct dt_config cfg;
    assert_int_equal(with_json(&cfg,
                               "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 8,"
                               " \"gradient_accumulation_steps\": 2}",
                               NULL, NULL),
                     DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(),
                        "ds.json:1:22: error: train_batch_size 64 is not train_micro_batch_size_per_gpu 8 x "
                        "gradient_accumulation_steps 2 x world size 2 = 32\n"
                        "  hint: set train_batch_size to \"auto\", or change one of the factors");
    dt_config_free(&cfg);

    assert_int_equal(with_json(&cfg, "{\"train_batch_size\": 60, \"train_micro_batch_size_per_gpu\": 8}", NULL, NULL),
                     DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(),
                        "ds.json:1:22: error: train_batch_size 60 is not divisible by train_micro_batch_size_per_gpu 8 "
                        "x world size 2 = 16 (DeepSpeed would silently truncate gradient_accumulation_steps)\n"
                        "  hint: make train_batch_size a multiple of the product, or give all three");
    dt_config_free(&cfg);

    /* DeepSpeed's fill rules: train + micro gives accumulation; train alone gives micro with accumulation 1 */
    assert_int_equal(with_json(&cfg, "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 8}", NULL, NULL),
                     DT_SUCCESS);
    assert_int_equal(cfg.compute.gradient_accumulation_steps, 4);
    assert_string_equal(dt_config_origin(&cfg, "compute.gradient_accumulation_steps")->note,
                        "DeepSpeed: train_batch_size 64 / (train_micro_batch_size_per_gpu 8 x world 2)");
    dt_config_free(&cfg);
    assert_int_equal(with_json(&cfg, "{\"train_batch_size\": 32}", NULL, NULL), DT_SUCCESS);
    assert_int_equal(cfg.compute.gradient_accumulation_steps, 1);
    assert_int_equal(cfg.data.micro_batch_size, 16);
    dt_config_free(&cfg);
    assert_int_equal(with_json(&cfg, "{\"train_batch_size\": 32, \"gradient_accumulation_steps\": 2}", NULL, NULL),
                     DT_SUCCESS);
    assert_int_equal(cfg.data.micro_batch_size, 8);
    dt_config_free(&cfg);
}

static void precision_blocks_win(void **state)
{
    struct dt_config cfg;
    char *warn = NULL;
    assert_int_equal(with_json(&cfg, "{\"fp16\": {\"enabled\": true, \"hysteresis\": 4}}",
                               "  precision: bf16-mixed\n", &warn),
                     DT_SUCCESS);
    assert_int_equal(cfg.compute.precision, DT_PREC_16_MIXED);
    assert_int_equal(cfg.compute.loss_scaler.hysteresis, 4);
    assert_string_equal(warn, "dtrun: warning: ds.json:1:22: fp16.enabled = true sets precision 16-mixed over "
                              "compute.precision = bf16-mixed (t.yaml:4:14): with strategy deepspeed the JSON's "
                              "fp16/bf16 blocks win\n");
    free(warn);
    dt_config_free(&cfg);
    assert_int_equal(with_json(&cfg, "{\"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}", NULL, NULL),
                     DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "ds.json:1:49: error: fp16.enabled and bf16.enabled are both true\n"
                                        "  hint: enable one of fp16 and bf16");
    dt_config_free(&cfg);
    assert_int_equal(with_json(&cfg, "{\"bf16\": {\"enabled\": false}}", "  precision: bf16-true\n", NULL), DT_SUCCESS);
    assert_int_equal(cfg.compute.precision, DT_PREC_32_TRUE);
    dt_config_free(&cfg);
}

static void refused_and_ignored(void **state)
{
    struct dt_config cfg;
    assert_int_equal(with_json(&cfg, "{\"optimizer\": {\"type\": \"Lamb\"}}", NULL, NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "ds.json:1:24: error: optimizer.type: 'Lamb' is not supported: dtrun does not "
                                        "implement LAMB; use Adam or AdamW");
    dt_config_free(&cfg);
    assert_int_equal(with_json(&cfg, "{\"zero_optimisation\": {\"stage\": 2}}", NULL, NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "ds.json:1:2: error: unknown section 'zero_optimisation' (DeepSpeed config)\n"
                                        "  hint: did you mean 'zero_optimization'?");
    dt_config_free(&cfg);
    assert_int_equal(with_json(&cfg, "{\"zero_optimization\": {\"offload_param\": {\"device\": \"nvme\"}}}", NULL, NULL),
                     DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "ds.json:1:52: error: zero_optimization.offload_param.device: 'nvme' is not "
                                        "supported: dtrun offloads to host memory only; use \"cpu\"");
    dt_config_free(&cfg);
    char *warn = NULL;
    assert_int_equal(with_json(&cfg, "{\"flops_profiler\": {\"enabled\": false},\n \"prescale_gradients\": true}", NULL,
                               &warn),
                     DT_SUCCESS);
    assert_string_equal(warn, "dtrun: warning: ds.json: 2 DeepSpeed keys set here have no meaning in dtrun:\n"
                              "  prescale_gradients (line 2): dtrun always divides gradients by the world size before "
                              "reducing\n  flops_profiler (line 1): dtrun reports MFU in its metrics "
                              "(events.peak_tflops)\n");
    free(warn);
    dt_config_free(&cfg);
}

/* Every JSON key that names a dtrun key reaches it: the enum-valued ones too. */
static void enums_reach_the_dtrun_config(void **state)
{
    struct dt_config cfg;
    assert_int_equal(with_json(&cfg, "{\"communication_data_type\": \"bf16\",\n \"scheduler\": {\"type\": "
                                     "\"WarmupLR\", \"params\": {\"warmup_type\": \"linear\"}}}",
                               NULL, NULL),
                     DT_SUCCESS);
    assert_int_equal(cfg.compute.grad_reduce_dtype, DT_DTYPE_BF16);
    assert_int_equal(cfg.scheduler.warmup_type, DT_WARMUP_LINEAR);
    assert_int_equal(dt_config_origin(&cfg, "scheduler.warmup_type")->kind, DT_ORIGIN_DEEPSPEED);
    dt_config_free(&cfg);
}

/* No mapping can be skipped silently: a JSON key naming a dtrun key has the same type and
 * names (merged generically), or is one of the converted pairs deepspeed.c merges by hand. */
static void every_mapping_is_merged(void **state)
{
    static const char *const by_hand[] = {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                          "scheduler.params.warmup_num_steps", "scheduler.params.total_num_steps",
                                          "zero_optimization.reduce_bucket_size"};
    for (size_t i = 0; i < dt_ds_schema.n; i++) {
        const struct dt_key *dk = &dt_ds_schema.keys[i];
        if (!dk->maps_to) continue;
        const struct dt_key *tk = dt_schema_find(&dt_config_schema, dk->maps_to, NULL);
        if (!tk) fail_msg("%s maps to %s, which is not a dtrun key", dk->path, dk->maps_to);
        bool generic = (dk->policy == DT_DS_WIN || dk->policy == DT_DS_MATCH) && tk->type == dk->type &&
                       (tk->type != DT_T_ENUM || tk->names == dk->names);
        bool hand = false;
        for (size_t j = 0; j < sizeof by_hand / sizeof by_hand[0]; j++) hand |= !strcmp(dk->path, by_hand[j]);
        if (generic == hand) fail_msg("%s -> %s: %s", dk->path, dk->maps_to,
                                      generic ? "merged twice" : "types or names differ and nothing merges it");
    }
}

DT_TESTS(T(every_mapping_is_merged), T(enums_reach_the_dtrun_config), T(autos_take_dtrun_values), T(explicit_json_fills_defaults), T(mismatches_reported_together),
         T(batch_identity), T(precision_blocks_win), T(refused_and_ignored))
