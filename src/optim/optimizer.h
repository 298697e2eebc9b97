/*
 * optimizer.h - AdamW and SGD over a model's flat buffers. Weight decay applies
 * to the views marked `decay` (matrices), not to biases, norms and (by default)
 * embeddings; the state lives in flat buffers parallel to the parameters so a
 * ZeRO strategy can hand the optimizer a shard by offset.
 */
#ifndef DT_OPTIMIZER_H
#define DT_OPTIMIZER_H

#include "model/model.h"

enum dt_optim_kind { DT_OPT_ADAMW, DT_OPT_ADAM, DT_OPT_SGD };

struct dt_optim_config {
    enum dt_optim_kind kind;
    float beta1, beta2, eps, weight_decay, momentum;
    bool nesterov;
};

struct dt_optimizer {
    struct dt_optim_config c;
    const struct dt_kernels *k;
    struct dt_kctx *kc;
    float *m, *v; /* AdamW moments, or SGD's momentum buffer in m */
    size_t n;
    int64_t t; /* optimizer steps taken */
};

/* State for n elements (all of a model, or the shard a ZeRO rank keeps). */
dt_status_t dt_optimizer_init(struct dt_optimizer *o, const struct dt_optim_config *c, const struct dt_kernels *k,
                              struct dt_kctx *kc, size_t n);
/* Bytes of state per element: 8 for Adam(W), 4 for SGD. */
size_t dt_optimizer_state_bytes(enum dt_optim_kind kind);
/* A step: begin it once, then update ranges. The update of n fp32 elements p with gradients g of
 * type gt (Adam's L2 penalty is added to them), their state at [at, at + n), at learning rate lr,
 * gradients taken times gscale; decay: weight decay applies. With plp not NULL the updated values
 * are also written there rounded to pt (master weights' 16-bit working copy). */
void dt_optimizer_begin(struct dt_optimizer *o);
void dt_optimizer_update(const struct dt_optimizer *o, float *p, const void *g, enum dt_dtype gt, void *plp,
                         enum dt_dtype pt, size_t at, size_t n, bool decay, float lr, float gscale);
/* The same update for AdamW and Adam as a slice of a multi-tensor step (kernels.h), into *s; false
 * (nothing written) for SGD, which updates with dt_optimizer_update. plp: as there. */
bool dt_optimizer_slice(const struct dt_optimizer *o, float *p, const void *g, void *plp, size_t at, size_t n,
                        bool decay, struct dt_adamw_slice *s);
/* Update the ns slices dt_optimizer_slice made, gradients of type gt, 16-bit copies of type pt. */
void dt_optimizer_apply(const struct dt_optimizer *o, const struct dt_adamw_slice *s, int ns, enum dt_dtype gt,
                        enum dt_dtype pt, float lr, float gscale);
/* One step of every view of a model that keeps its own buffers (m->params, m->grads). */
void dt_optimizer_step(struct dt_optimizer *o, struct dt_model *m, float lr, float gscale);
void dt_optimizer_free(struct dt_optimizer *o);

/* Global L2 norm of a model's own gradients (m->grads), and in *gscale the factor that clips them to
 * norm `clip` (torch.nn.utils.clip_grad_norm_: clip / (norm + 1e-6) when that is
 * below 1, else 1; clip 0 means no clipping). The optimizer applies the factor. */
float dt_grad_norm(const struct dt_model *m, float clip, float *gscale);

#endif
