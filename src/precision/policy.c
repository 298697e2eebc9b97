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
    case DT_PREC_BF16_TRUE:
        p->compute = DT_BF16;
        p->bf16_params = true;
        break;
    default:
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: unknown compute.precision %d", cfg->compute.precision);
    }
    return DT_SUCCESS;
}
