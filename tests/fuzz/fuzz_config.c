/*
 * fuzz_config.c - the config loader: the bytes as config.yaml through dt_config_load
 * (libyaml, the node composer, the schema table with its types, ranges and
 * suggestions) and dt_config_resolve (every "auto" filled, what must agree checked),
 * as `dtrun check config.yaml` outside an allocation. A config that resolves is
 * printed, read back, and must hold the same values (dt_fuzz_config_reads_back).
 * Seeds: tests/fuzz/corpus/config/ (the templates, the tests' configs, broken ones).
 */
#include "config/config.h"
#include "config/resolve.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    dt_fuzz_write("config.yaml", data, size, path, sizeof path);
    struct dt_config cfg;
    struct dt_geometry geo = {.gpu_note = "no GPU (fuzz)"};
    dt_fuzz_begin();
    dt_status_t rc = dt_config_init(&cfg);
    if (rc == DT_SUCCESS) rc = dt_config_load(&cfg, NULL, path, 0, NULL);
    if (rc == DT_SUCCESS) rc = dt_config_resolve(&cfg, &geo);
    dt_fuzz_check_error(rc, "dt_config_load + dt_config_resolve");
    if (rc == DT_SUCCESS) dt_fuzz_config_reads_back(&cfg, &geo);
    dt_config_free(&cfg);
    return 0;
}
