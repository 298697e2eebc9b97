/* test_config.c - the schema-driven loader and resolver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/emit.h"
#include "config/schema.h"
#include "core/error.h"
#include "dt_test.h"

static void defaults_resolve(void **state)
{
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, NULL), DT_SUCCESS);
    assert_int_equal(cfg.compute.device, DT_DEVICE_CPU);
    assert_string_equal(dt_config_origin(&cfg, "compute.device")->note, "no GPU (test)");
    assert_int_equal(cfg.resolved.world, 1);
    assert_int_equal(cfg.resolved.strategy, DT_STRAT_SINGLE);
    assert_string_equal(cfg.run.dir, "runs/gpt-tiny");
    assert_string_equal(cfg.checkpoint.resume, "auto");
    assert_true(cfg.scheduler.warmup_max_lr == cfg.optimizer.lr);
    for (size_t i = 0; i < dt_config_schema.n; i++) assert_non_null(dt_config_schema.keys[i].help);
    dt_config_free(&cfg);
}

static void precision_names(void **state)
{
    static const struct {
        const char *name;
        int want;
    } cases[] = {{"32", DT_PREC_32_TRUE},       {"32-true", DT_PREC_32_TRUE},       {"16", DT_PREC_16_MIXED},
                 {"16-mixed", DT_PREC_16_MIXED}, {"bf16", DT_PREC_BF16_MIXED},       {"BF16-Mixed", DT_PREC_BF16_MIXED},
                 {"bf16-true", DT_PREC_BF16_TRUE}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char ov[64];
        snprintf(ov, sizeof ov, "compute.precision=%s", cases[i].name);
        struct dt_config cfg;
        assert_int_equal(dt_test_config(&cfg, NULL, NULL, ov, NULL), DT_SUCCESS);
        assert_int_equal(cfg.compute.precision, cases[i].want);
        dt_config_free(&cfg);
    }
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, "compute: {precision: 64}\n", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(),
                        "t.yaml:1:22: error: compute.precision: '64' is not supported: dtrun has no float64 training; use 32-true");
    dt_config_free(&cfg);
    assert_int_equal(dt_test_config(&cfg, NULL, "compute: {precision: bf16_mixed}\n", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "t.yaml:1:22: error: compute.precision: 'bf16_mixed' is not one of 32-true, "
                                        "16-mixed, bf16-mixed, bf16-true, fp8-mixed (did you mean 'bf16-mixed'?)");
    dt_config_free(&cfg);
}

static void nested_suggestion(void **state)
{
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, "compute:\n  strategy_config:\n    bucket_cap: 5\n", NULL),
                     DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "t.yaml:3:5: error: unknown key 'bucket_cap' in compute.strategy_config "
                                        "(dtrun config)\n  hint: did you mean 'bucket_cap_mb'?");
    dt_config_free(&cfg);
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.n_layers=3", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "override 'model.n_layers=3': error: unknown key 'n_layers' in model (dtrun "
                                        "config)\n  hint: did you mean 'n_layer'?");
    dt_config_free(&cfg);
    assert_int_equal(dt_test_config(&cfg, NULL, "model:\n  colour: red\n", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "t.yaml:2:3: error: unknown key 'colour' in model (dtrun config)\n"
                                        "  hint: its keys are: type, n_layer, n_head, n_embd, vocab_size, seq_len, "
                                        "preset, n_kv_head, intermediate_size, max_position_embeddings, norm_eps, "
                                        "rope_theta, rope_scaling, "
                                        "tie_embeddings, activation_checkpointing, init_from, tokenizer, mlp");
    dt_config_free(&cfg);
}

static void overrides(void **state)
{
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, "optimizer: {lr: 1.0e-3}\n", "optimizer.lr=2e-3",
                                    "compute.loss_scaler={hysteresis: 3, min_loss_scale: 0.5}", "data.val=", NULL),
                     DT_SUCCESS);
    assert_true(cfg.optimizer.lr == 2e-3);
    assert_int_equal(dt_config_origin(&cfg, "optimizer.lr")->kind, DT_ORIGIN_OVERRIDE);
    assert_int_equal(cfg.compute.loss_scaler.hysteresis, 3);
    assert_true(cfg.compute.loss_scaler.min_loss_scale == 0.5);
    assert_null(cfg.data.val);
    dt_config_free(&cfg);
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "compute.loss_scaler=3", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "override 'compute.loss_scaler=3': error: compute.loss_scaler is a section, "
                                        "not a single value\n  hint: set one key, e.g. compute.loss_scaler.<key>=VALUE, "
                                        "or a mapping: compute.loss_scaler='{key: value}'");
    dt_config_free(&cfg);
}

static void contradictions(void **state)
{
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL,
                                    "compute:\n  strategy_config: {config: ds.json}\nevents:\n  webhook: {secret_env: S}\n"
                                    "run: {max_duration: 2ep}\n",
                                    NULL),
                     DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(),
                        "t.yaml:5:21: error: run.max_duration is in epochs, but the synthetic source is endless\n"
                        "  hint: give the length in ba, sp or tok\n"
                        "t.yaml:4:25: error: events.webhook.secret_env is set but events.webhook.url is not\n"
                        "  hint: set events.webhook.url or remove secret_env\n"
                        "t.yaml:2:29: error: compute.strategy_config.config names a DeepSpeed JSON but "
                        "compute.strategy is not deepspeed (default)\n"
                        "  hint: set compute.strategy: deepspeed to use the JSON, or remove strategy_config.config");
    dt_config_free(&cfg);
    assert_int_equal(dt_test_config(&cfg, NULL, "data: {train: \"a_*.bin\"}\nrun: {eval_interval: 50ba}\n", NULL),
                     DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(),
                        "t.yaml:2:22: error: run.eval_interval asks for validation but data.val is not set\n"
                        "  hint: set data.val, or run.eval_interval: 0ba");
    dt_config_free(&cfg);
    assert_int_equal(dt_test_config(&cfg, NULL, "compute: {strategy: deepspeed}\n", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(),
                        "t.yaml:1:21: error: compute.strategy deepspeed needs compute.strategy_config.config\n"
                        "  hint: name the JSON: compute.strategy_config.config: ds_config.json");
    dt_config_free(&cfg);
}

/* What `dtrun check` prints reads back to exactly the same values. */
static void emit_reads_back(void **state)
{
    struct dt_config a, b;
    assert_int_equal(dt_test_config(&a, NULL, "run: {name: \"tab\\there \\\"q\\\"\", max_duration: 1.5Mtok}\n",
                                    "optimizer.lr=0.1", "compute.num_devices=3", "optimizer.betas=[0.85, 0.975]",
                                    "compute.comm_timeout=250ms", NULL),
                     DT_SUCCESS);
    FILE *f = fopen("out.yaml", "w");
    dt_config_emit(&a, f);
    fclose(f);
    assert_int_equal(dt_config_init(&b), DT_SUCCESS);
    assert_int_equal(dt_config_load(&b, NULL, "out.yaml", 0, NULL), DT_SUCCESS);
    struct dt_geometry none = {0};
    assert_int_equal(dt_config_resolve(&b, &none), DT_SUCCESS);
    for (size_t i = 0; i < dt_config_schema.n; i++) {
        const struct dt_key *k = &dt_config_schema.keys[i];
        if (!dt_value_equal(k->type, DT_FIELD(&a, k), DT_FIELD(&b, k))) fail_msg("%s differs after reading back", k->path);
    }
    assert_string_equal(b.run.name, "tab\there \"q\"");
    dt_config_free(&a);
    dt_config_free(&b);
}

DT_TESTS(T(defaults_resolve), T(precision_names), T(nested_suggestion), T(overrides), T(contradictions),
         T(emit_reads_back))
