/*
 * fuzz_precision.c - precision names (Lightning's: 32-true, 16-mixed, bf16, "16", ...):
 * the bytes after the first as the value of compute.precision (or, by the first byte, of
 * compute.grad_reduce_dtype), plain or quoted as YAML would hand it, through the schema's
 * enum parser, dt_config_resolve and dt_precision_from_config. A name that is taken must
 * give a policy named by its canonical spelling.
 */
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "config/resolve.h"
#include "config/schema.h"
#include "precision/policy.h"
#include "core/error.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    dt_fuzz_init();
    char *s = dt_fuzz_str(data + 1, size - 1);
    const char *key = data[0] & 2 ? "compute.grad_reduce_dtype" : "compute.precision";
    struct dt_config cfg;
    dt_fuzz_begin();
    if (dt_config_init(&cfg) != DT_SUCCESS) dt_fuzz_fail("dt_config_init failed");
    struct dt_loc where = {"fuzz", 1, 1};
    struct dt_ynode node = {.kind = DT_Y_SCALAR, .loc = where, .str = s, .quoted = data[0] & 1};
    struct dt_diags d = {0};
    dt_schema_set(&dt_config_schema, &cfg, cfg.origin, key, &node, where, DT_ORIGIN_OVERRIDE, &d);
    dt_status_t rc = dt_diag_finish(&d);
    struct dt_geometry geo = {.gpu_note = "no GPU (fuzz)"};
    if (rc == DT_SUCCESS) rc = dt_config_resolve(&cfg, &geo);
    dt_fuzz_check_error(rc, key);
    if (rc == DT_SUCCESS) {
        struct dt_prec_policy p;
        rc = dt_precision_from_config(&cfg, &p);
        if (rc != DT_SUCCESS) dt_fuzz_fail("'%s' is taken as %s, but dt_precision_from_config refuses it: %s", s, key,
                                           dt_error_msg());
        if (!p.name || strcmp(p.name, dt_enum_str(dt_precision_names, cfg.compute.precision)))
            dt_fuzz_fail("'%s': the policy is named %s", s, p.name ? p.name : "(null)");
    }
    dt_config_free(&cfg);
    free(s);
    return 0;
}
