/*
 * policy.h - what a precision name means for the trainer (Lightning's names):
 *   32-true     fp32 everywhere
 *   bf16-mixed  fp32 master weights and optimizer state; every matmul takes
 *               its operands rounded to bf16 and accumulates in fp32
 *   16-mixed    the same with fp16, and the loss scaled by DeepSpeed's scaler
 *               (compute.loss_scaler; a DeepSpeed JSON's fp16 block fills it)
 *   bf16-true   parameters stored in bf16: after every optimizer step they are
 *               rounded to bf16 (the fp32 optimizer state is kept; the kernels
 *               read an fp32 copy of the bf16 values), bf16 matmuls and
 *               activations as in bf16-mixed
 */
#ifndef DT_POLICY_H
#define DT_POLICY_H

#include <stdbool.h>
#include "config/config.h"
#include "core/dtype.h"
#include "precision/loss_scaler.h"

struct dt_prec_policy {
    const char *name;
    enum dt_dtype compute; /* matmul operands */
    bool scaled;           /* fp16: the loss is scaled and overflowing steps are skipped */
    bool bf16_params;      /* bf16-true */
    struct dt_loss_scaler_config scaler;
};

dt_status_t dt_precision_from_config(const struct dt_config *cfg, struct dt_prec_policy *p);

#endif
