/* policy.c - see policy.h. */
#include "config/schema.h"
#include "core/error.h"
#include "precision/policy.h"

dt_status_t dt_precision_from_config(const struct dt_config *cfg, struct dt_prec_policy *p)
{
    const struct dt_loss_scaler_config fixed_one = {1, 0, 1, 1, false, 1}; /* bf16 and fp32: a static scale of 1 */
    *p = (struct dt_prec_policy){.name = dt_enum_str(dt_precision_names, cfg->compute.precision), .compute = DT_F32,
                               .scaler = fixed_one};
    switch (cfg->compute.precision) {
    case DT_PREC_32_TRUE: break;
    case DT_PREC_BF16_MIXED: p->compute = DT_BF16; break;
    case DT_PREC_16_MIXED:
        p->compute = DT_F16;
        p->scaled = true;
        p->scaler = (struct dt_loss_scaler_config){cfg->compute.loss_scaler.loss_scale,
                                                   cfg->compute.loss_scaler.initial_scale_power,
                                                   cfg->compute.loss_scaler.loss_scale_window,
                                                   cfg->compute.loss_scaler.hysteresis,
                                                   cfg->compute.loss_scaler.consecutive_hysteresis,
                                                   cfg->compute.loss_scaler.min_loss_scale};
        break;
    case DT_PREC_FP8_MIXED:
        p->compute = DT_BF16;
        p->fp8 = true;
        p->fp8r = (struct dt_fp8_recipe){
            cfg->compute.fp8.format == DT_FP8_HYBRID ? DT_FP8_E5M2 : DT_FP8_E4M3,
            cfg->compute.fp8.scaling == DT_FP8_CURRENT, (int)cfg->compute.fp8.amax_history_len,
            cfg->compute.fp8.amax_compute_algo == DT_FP8_AMAX_MOST_RECENT, (float)cfg->compute.fp8.margin};
        break;
    case DT_PREC_BF16_TRUE:
        p->compute = DT_BF16;
        p->bf16_params = true;
        break;
    default:
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: unknown compute.precision %d", cfg->compute.precision);
    }
    return DT_SUCCESS;
}
