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
 *   fp8-mixed   bf16-mixed, with a transformer's linear layers multiplied in FP8 as Transformer
 *               Engine's recipes do (compute.fp8; precision/fp8.h)
 */
#ifndef DT_POLICY_H
#define DT_POLICY_H

#include <stdbool.h>
#include "config/config.h"
#include "core/dtype.h"
#include "core/fp8.h"
#include "precision/loss_scaler.h"

/* compute.fp8: the gradients' format (E5M2 under hybrid), current or delayed scaling, delayed's
 * history and how an amax is taken from it, the margin */
struct dt_fp8_recipe {
    enum dt_fp8_fmt grad;
    bool current;
    int history_len;
    bool most_recent;
    float margin;
};

struct dt_prec_policy {
    const char *name;
    enum dt_dtype compute; /* matmul operands */
    bool scaled;           /* fp16: the loss is scaled and overflowing steps are skipped */
    bool bf16_params;      /* bf16-true */
    bool fp8;              /* fp8-mixed, with recipe fp8r */
    struct dt_fp8_recipe fp8r;
    struct dt_loss_scaler_config scaler;
};

dt_status_t dt_precision_from_config(const struct dt_config *cfg, struct dt_prec_policy *p);

#endif
