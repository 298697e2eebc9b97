/*
 * fuzz_deepspeed.c - the DeepSpeed JSON merge: the bytes as ds.json, named by
 * compute.strategy_config.config of a deepspeed config and merged by dt_config_resolve
 * (dt_ds_load_merge: the JSON read with the config loader, "auto" filled from dtrun's
 * values, mismatches reported together, the batch identity completed and checked).
 * Twice: over the defaults in one process, and over explicit values on 2 x 2 ranks, so
 * both sides of every MATCH and WIN rule are reached. What resolves must read back
 * (dt_fuzz_config_reads_back). Seeds: the JSONs of templates/deepspeed/ and variations.
 */
#include <stdio.h>
#include "config/config.h"
#include "config/resolve.h"
#include "fuzz.h"

static void merge(const char *json, int nov, char **ov)
{
    char setting[600];
    snprintf(setting, sizeof setting, "compute.strategy_config.config=%s", json);
    ov[nov++] = setting;
    struct dt_config cfg;
    struct dt_geometry geo = {.gpu_note = "no GPU (fuzz)"};
    dt_fuzz_begin();
    dt_status_t rc = dt_config_init(&cfg);
    if (rc == DT_SUCCESS) rc = dt_config_load(&cfg, NULL, NULL, nov, ov);
    if (rc != DT_SUCCESS) dt_fuzz_fail("the base config does not load: %s", dt_status_str(rc));
    rc = dt_config_resolve(&cfg, &geo);
    dt_fuzz_check_error(rc, "dt_config_resolve (dt_ds_load_merge)");
    if (rc == DT_SUCCESS) dt_fuzz_config_reads_back(&cfg, &geo);
    dt_config_free(&cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    dt_fuzz_write("ds.json", data, size, path, sizeof path);
    char *defaults[] = {"compute.strategy=deepspeed", NULL};
    merge(path, 1, defaults);
    char *explicit[] = {"compute.strategy=deepspeed", "compute.num_nodes=2", "compute.num_devices=2",
                        "data.micro_batch_size=4", "compute.gradient_accumulation_steps=2", "optimizer.lr=1e-3",
                        "compute.gradient_clipping=0.5", "compute.precision=bf16-mixed", "scheduler.type=linear",
                        NULL};
    merge(path, 9, explicit);
    return 0;
}
