/*
 * reference.c - `dtrun help config`: one Markdown table row per key of the
 * schema. README.md holds this output between two markers, and
 * tests/cli/test_reference.sh fails when they drift.
 */
#include "config/config.h"
#include "config/reference.h"
#include "config/schema.h"

void dt_config_reference(FILE *out)
{
    fprintf(out, "| key | default | accepts | what it does |\n|---|---|---|---|\n");
    for (size_t i = 0; i < dt_config_schema.n; i++) {
        const struct dt_key *k = &dt_config_schema.keys[i];
        char acc[512], range[160] = "";
        dt_key_accepts(k, acc, sizeof acc);
        if ((k->type == DT_T_INT || k->type == DT_T_FLOAT) && k->max < 1e300)
            snprintf(range, sizeof range, " in %s%.15g, %.15g]", (k->flags & DT_F_MIN_EXCL) ? "(" : "[", k->min, k->max);
        fprintf(out, "| `%s` | `%s` | %s%s%s%s | %s |\n", k->path, k->def ? k->def : "null", acc, range,
                (k->flags & DT_F_AUTO) ? ", or auto" : "", (k->flags & DT_F_NULLABLE) ? ", or null" : "", k->help);
    }
}
