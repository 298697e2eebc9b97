/*
 * kernels.h - the op table the models call, and the memory they call it on. One instance per
 * backend: dt_kernels_cpu, and the CUDA table over the module's kernels (kernels/cuda_table.c),
 * which the CPU kernels are the reference of; dt_kernels_for chooses (backend_reg.c).
 *
 * Shapes use llm.c's letters: B batch, T time (sequence), C channels,
 * OC output channels, NH heads, V vocabulary. Tensors are row-major; gradients
 * and the residual stream are fp32, parameters fp32 or a strategy's 16-bit
 * storage (the ops that read it say `wt`), and the activations between ops are
 * of the run's activation type: fp32, or under mixed precision its 16-bit type,
 * as torch.autocast stores them (the ops that take one say `at`). Backward
 * kernels ACCUMULATE into their fp32 d* outputs (+=), so callers zero gradient
 * buffers once per step and branches (residuals, tied embeddings) add up for
 * free; a gradient that feeds a 16-bit matmul (attention's dqkv, GELU's and
 * SwiGLU's dinp) is written (=) in the activation type instead, and rope's
 * backward turns dqkv in place. Every kernel runs on the shared OpenMP pool
 * (oneDNN's CPU runtime is OpenMP too), so oneDNN and our loops never
 * oversubscribe.
 */
#ifndef DT_KERNELS_H
#define DT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/fp8.h"
#include "core/status.h"

/*
 * A backend's state for one model and everything around it (its strategy, optimizer, loss
 * scaler): the CPU's oneDNN engine, stream, primitive cache and 16-bit scratch; a GPU's device,
 * cuBLASLt handle, workspace and first error. Nothing of a backend lives in file statics, so two
 * models in one process (the tests make several) share nothing but the thread pool.
 */
struct dt_kctx;

/* what a copy moves between: host memory and the backend's tensor memory (the same on the CPU) */
enum dt_copy_kind { DT_COPY_TO_DEVICE, DT_COPY_TO_HOST, DT_COPY_ON_DEVICE };

/* The outputs of matmul_backward to overwrite rather than add to: a gradient's first write of a
 * step needs no zeroed buffer, and the gemm reads nothing back (the values in CUDA's module too). */
enum { DT_SET_DINP = 1u, DT_SET_DPARAMS = 2u };

/* Where a loss goes when the host is not to wait for it: acc (a double in the kernels' memory: the
 * GPU's, or host memory on the CPU) gets the mean loss, rounded to float as the op would return it,
 * divided by div (a step's micro-batches into one sum, read once when the step ends). */
struct dt_loss_sink {
    double *acc;
    double div;
};

/* A part of a step's gradient check (sumsq_parts): n elements at x, their inf/nan counted, and their
 * squares too where squares is set (the part of the norm this rank counts). */
struct dt_norm_part {
    const void *x;
    size_t n;
    bool squares;
};

/* One slice of AdamW's update: what differs between the slices of a multi-tensor step (adamw_slices);
 * each field as adamw's argument of that name. */
struct dt_adamw_slice {
    float *param, *m, *v;
    const void *grad;
    void *plp;
    size_t n;
    float wd, l2;
};

/* How an FP8 matmul quantises one of its operands (fp8-mixed, Transformer Engine's per-tensor
 * scaling): each value, first rounded to bf16 as the 16-bit matmuls round it (an fp32 dout, an fp32
 * weight), is multiplied by the tensor's scale in fp32 and converted to fmt (core/fp8.h: nearest even,
 * saturating); the product of two quantised operands is accumulated in fp32 and multiplied by the
 * inverses of both scales (1.0f / scale each, their product rounded once).
 *   delayed (current false): scale is *scale (tensor memory, written by fp8_update between optimizer
 *       steps), and the tensor's amax (the largest |value| after the bf16 rounding; NaNs ignored) is
 *       folded into *amax (*amax = max(*amax, amax)); amax NULL: not recorded (the forward did).
 *   current: the scale comes from this tensor's own amax, dt_fp8_scale(amax, 1, fmt, 0); scale unused,
 *       amax recorded as above when not NULL. */
struct dt_fp8_q {
    const float *scale;
    float *amax;
    enum dt_fp8_fmt fmt;
    bool current;
};

/* the largest head size attention_cached takes (Llama's and GPT-2's are 64 and 128) */
#define DT_ATTN_CACHED_HS_MAX 256

struct dt_kernels {
    const char *name;
    /* device: the GPU ordinal the context drives (-1 for the CPU) */
    dt_status_t (*ctx_create)(int device, struct dt_kctx **out);
    void (*ctx_destroy)(struct dt_kctx *kc);
    /*
     * Tensor memory: everything the model, optimizer and strategy read or write with the ops below
     * comes from alloc (zeroed; NULL when there is not enough) and is touched only through these
     * slots and the ops, never by the host directly, so the CPU runs the code path a GPU takes.
     * copy's kind says which side each pointer is on.
     */
    void *(*alloc)(struct dt_kctx *kc, size_t bytes);
    void (*free)(struct dt_kctx *kc, void *p);
    void (*zero)(struct dt_kctx *kc, void *p, size_t bytes);
    void (*copy)(struct dt_kctx *kc, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind);
    /* Copies beside the ops (optional; NULL: the caller copies with copy). copy_async queues a copy
     * after the ops queued so far, on a stream of its own on a GPU so that the ops queued next run
     * meanwhile, and returns its ticket; copy_wait makes what follows wait for the copies up to a
     * ticket: the host (host true: it reads or writes the host side next) or the ops queued after
     * it (host false: they read what came up). A copy's buffers stay untouched until it is waited
     * for; its host side is host_alloc's. */
    uint64_t (*copy_async)(struct dt_kctx *kc, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind);
    void (*copy_wait)(struct dt_kctx *kc, uint64_t ticket, bool host);
    /* A copy among the ops, in their order (optional; NULL: the caller copies with copy): on a GPU
     * on their own stream, so that neither the host waits for the ops queued before it (as a copy
     * from pageable memory does) nor the ops after it for other copies; its host side host_alloc's,
     * left untouched until copy_wait(ticket, true) says the copy has read or written it. */
    uint64_t (*copy_inline)(struct dt_kctx *kc, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind);
    /* Host memory that copies to and from tensor memory run fastest from (a GPU's: page-locked):
     * checkpoint staging, offloaded state. */
    void *(*host_alloc)(struct dt_kctx *kc, size_t bytes);
    void (*host_free)(struct dt_kctx *kc, void *p);
    /* Wait for every op queued so far and say whether all of them ran: ops return nothing (a
     * GPU's run asynchronously), so the context keeps the first failure, naming the op and the
     * device; step says which training step it was for the message. */
    dt_status_t (*synchronize)(struct dt_kctx *kc, int64_t step);
    /* Block until every op queued so far has run, keeping a failure for synchronize to report: how
     * a profile (profile.h) times each op on the device. The CPU's ops have run when they return. */
    void (*wait)(struct dt_kctx *kc);
    /* A GPU's memory, as torch.cuda reports it: the most this context's allocations have held at
     * once (peak allocated), and what the device has in use (reserved: those allocations, the CUDA
     * context, the libraries' workspaces). NULL on the CPU, whose memory is the process's RSS. */
    void (*device_memory)(struct dt_kctx *kc, int64_t *peak_allocated, int64_t *reserved);
    /* Prepare the calling thread before the first parallel region (threads started later inherit it). */
    void (*init)(void);
    /* The code paths this machine gets for matmuls with operands in `compute` (chosen from the
     * CPU's features at run time), for the log: "oneDNN sgemm; conversions avx512". */
    void (*describe)(struct dt_kctx *kc, char *buf, size_t n, enum dt_dtype compute);
    /* out(BT,OC) = inp(BT,C) @ weight(OC,C)^T + bias(OC); bias may be NULL */
    void (*matmul_forward)(struct dt_kctx *kc, float *out, const float *inp, const float *weight, const float *bias, int BT, int C, int OC);
    /* dinp += dout @ weight; dweight += dout^T @ inp; dbias += sum_BT dout (dbias may be NULL);
     * the outputs that `set` names (DT_SET_*) are overwritten instead, whatever they held */
    void (*matmul_backward)(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int BT, int C, int OC, unsigned set);
    /* The matmuls of mixed precision: inp holds activations of type lp (DT_BF16 or DT_F16, stored
     * in 16 bits between ops as torch.autocast keeps them), the products are accumulated in fp32
     * and the bias added in fp32, and out is of type ot: lp (rounded once, to nearest even) or
     * DT_F32. weight and bias are of type wt: DT_F32 (both rounded to lp here, as autocast's F.linear
     * rounds them), or lp already (a
     * strategy's 16-bit storage, read as it is: the weights are converted once per optimizer step,
     * not once per use). */
    void (*matmul_forward_lp)(struct dt_kctx *kc, void *out, enum dt_dtype ot, const void *inp, const void *weight,
                              const void *bias, enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype lp);
    /* dout of type dt: lp, or DT_F32 (a residual stream's gradient, rounded to lp here as autograd
     * rounds the gradient that reaches a 16-bit output); inp of type lp; dinp, dweight and dbias in
     * fp32, dbias the column sums of dout as the products read it (rounded) */
    void (*matmul_backward_lp)(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const void *dout,
                               enum dt_dtype dt, const void *inp, const void *weight, enum dt_dtype wt, int BT, int C,
                               int OC, enum dt_dtype lp, unsigned set);
    /* GELU in the matmul, as cuBLASLt's epilogues do it (GELU_AUX_BIAS, DGELU), for lp 16-bit only and
     * where gelu_fused says this context runs them (NULL or false: the model runs the matmul and the
     * GELU apart, the same results):
     * matmul_gelu_forward_lp: pre = inp @ weight^T + bias and out = gelu(pre), both of type lp
     * (matmul_forward_lp into pre, then gelu_forward);
     * matmul_dgelu_backward_lp: the backward of a linear layer whose input was gelu(pre): dpre =
     * gelu'(pre) * (dout @ weight), of type lp, overwritten, without the fp32 dinp between; dweight
     * and dbias as matmul_backward_lp's (its dinp, then gelu_backward). */
    bool (*gelu_fused)(struct dt_kctx *kc);
    void (*matmul_gelu_forward_lp)(struct dt_kctx *kc, void *out, void *pre, const void *inp, const void *weight,
                                   const void *bias, enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype lp);
    void (*matmul_dgelu_backward_lp)(struct dt_kctx *kc, void *dpre, const void *pre, float *dweight, float *dbias,
                                     const void *dout, enum dt_dtype dt, const void *inp, const void *weight,
                                     enum dt_dtype wt, int BT, int C, int OC, enum dt_dtype lp, unsigned set);
    /* The linear layers of fp8-mixed: matmul_forward_lp's arguments and meaning with lp = DT_BF16 (inp
     * of type DT_BF16, weight and bias of type wt, the bias rounded to bf16 and added in fp32, out of
     * type ot), the operands quantised as qx (inp) and qw (weight) say (struct dt_fp8_q). */
    void (*matmul_forward_fp8)(struct dt_kctx *kc, void *out, enum dt_dtype ot, const void *inp, const void *weight,
                               const void *bias, enum dt_dtype wt, int BT, int C, int OC, const struct dt_fp8_q *qx,
                               const struct dt_fp8_q *qw);
    /* matmul_backward_lp's with lp = DT_BF16: dout (type dt) quantised as qg, inp and weight as qx and
     * qw (the forward's scales; their amax NULL), dinp = dout @ weight and dweight = dout^T @ inp on
     * the quantised operands; dbias the column sums of dout rounded to bf16, unquantised (Transformer
     * Engine's bgrad) */
    void (*matmul_backward_fp8)(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const void *dout,
                                enum dt_dtype dt, const void *inp, const void *weight, enum dt_dtype wt, int BT, int C,
                                int OC, const struct dt_fp8_q *qx, const struct dt_fp8_q *qw,
                                const struct dt_fp8_q *qg, unsigned set);
    /* Delayed scaling's update after an optimizer step, Transformer Engine's amax_and_scale_update for
     * n tensors: hist (len, n) holds each tensor's amax history, row 0 the amaxes of the step just
     * done (where the matmuls fold them). Each tensor's history is rolled (row i takes row i + 1, row
     * len - 1 the step's amax, row 0 zero again), its amax taken as the largest of the history before
     * the roll (most_recent: the step's), and scale[i] = dt_fp8_scale(amax, scale[i], fmt, margin),
     * fmt E4M3 for tensors 3j and 3j + 1 (linear j's input and weight), gfmt for 3j + 2 (its output
     * gradient). *saturated (fp32) grows by the number of tensors whose step amax times the scale they
     * were quantised with exceeded twice their format's largest value: values a binade or more beyond
     * the range were clipped, a jump the history did not foresee (a tensor growing slowly, as weights
     * do, is clipped a little at most steps under delayed scaling, Transformer Engine's included:
     * not counted). */
    void (*fp8_update)(struct dt_kctx *kc, float *hist, float *scale, int n, int len, bool most_recent, float margin,
                       enum dt_fp8_fmt gfmt, float *saturated);
    /* NULL, or DT_SUCCESS when this device multiplies FP8 (the CPU emulates it: NULL); otherwise an
     * error that names the device and what it lacks (CUDA: compute capability 8.9 or newer). */
    dt_status_t (*fp8_supported)(struct dt_kctx *kc);
    /* fp32 <-> bf16/fp16 (t), round to nearest even; round_lp: dst = src rounded to t, kept in fp32 */
    void (*cast_to_lp)(struct dt_kctx *kc, uint16_t *dst, const float *src, size_t n, enum dt_dtype t);
    void (*cast_from_lp)(struct dt_kctx *kc, float *dst, const uint16_t *src, size_t n, enum dt_dtype t);
    void (*round_lp)(struct dt_kctx *kc, float *dst, const float *src, size_t n, enum dt_dtype t);
    /* out = (inp - mean) * rstd * weight + bias, per row of C, computed in fp32 and stored as ot
     * (fp32, or the 16-bit activation type: autocast's fp32 layernorm with the next matmul's cast
     * folded into its store); mean, rstd (BT) kept for backward. Backward reads and writes fp32:
     * dinp is the residual stream's gradient, dout the matmul's fp32 dinp. */
    void (*layernorm_forward)(struct dt_kctx *kc, void *out, enum dt_dtype ot, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int BT, int C);
    /* dinp_lp not NULL: dinp, once added to, also rounded into it (type lt): the residual stream's
     * gradient as the next 16-bit matmul backward reads it, so no pass of its own rounds it */
    void (*layernorm_backward)(struct dt_kctx *kc, float *dinp, void *dinp_lp, enum dt_dtype lt, float *dweight,
                               float *dbias, const float *dout, const float *inp, const float *weight, const float *mean,
                               const float *rstd, int BT, int C);
    /* RMSNorm (Llama): out = inp * rstd * weight per row of C, rstd = 1 / sqrt(mean(inp^2) + eps),
     * in fp32, out stored as ot; rstd (BT) kept for backward. Backward as layernorm's: dinp += (fp32,
     * the residual stream's gradient; dinp_lp not NULL: also rounded into it, type lt), dweight +=
     * the sum over rows in DT_ROW_BLOCK's order. */
    void (*rmsnorm_forward)(struct dt_kctx *kc, void *out, enum dt_dtype ot, float *rstd, const float *inp,
                            const float *weight, float eps, int BT, int C);
    void (*rmsnorm_backward)(struct dt_kctx *kc, float *dinp, void *dinp_lp, enum dt_dtype lt, float *dweight,
                             const float *dout, const float *inp, const float *weight, const float *rstd, int BT,
                             int C);
    /* Rotary position embeddings in place on the query and key heads of qkv (B,T,(NH + 2 NKV) hs):
     * NH query heads, then NKV key heads, then the values; Hugging Face's rotate-half layout (element
     * i pairs with i + hs/2; hs even), cs the (T, hs) table of dt_rope_table (formulas.h); of type
     * at, turned in fp32. Backward turns dq and dk of dqkv back in place: a rotation's transpose. */
    void (*rope_forward)(struct dt_kctx *kc, void *qkv, enum dt_dtype at, const float *cs, int B, int T, int NH,
                         int NKV, int hs);
    void (*rope_backward)(struct dt_kctx *kc, void *dqkv, enum dt_dtype at, const float *cs, int B, int T, int NH,
                          int NKV, int hs);
    /* SwiGLU (Llama's MLP): out (BT, H) = silu(gate) * up, gate and up the halves of each row of inp
     * (BT, 2H), gate first; of type at, in fp32. Backward writes dinp (BT, 2H) (=, type at) from the
     * fp32 dout. */
    void (*swiglu_forward)(struct dt_kctx *kc, void *out, const void *inp, enum dt_dtype at, int BT, int H);
    void (*swiglu_backward)(struct dt_kctx *kc, void *dinp, const void *inp, const float *dout, enum dt_dtype at,
                            int BT, int H);
    /* Causal attention with grouped-query heads, fused (flash attention's blocks and online softmax
     * on both backends: the T x T matrix is never stored). Each row of qkv (B,T,(NH + 2 NKV) hs), hs =
     * C / NH, holds NH query heads, then NKV key heads, then NKV value heads (NKV divides NH: NH is
     * multi-head attention's (B,T,3C), 1 multi-query); query head h attends with key and value head
     * h / (NH / NKV), Hugging Face's repeat_kv. out (B,T,C) holds the result; qkv and out are of type
     * at (fp32, or the 16-bit activation type); scores, softmax and sums are fp32 on both. The CPU,
     * the reference, keeps the probabilities and dout in fp32 for their products; the GPU's
     * tensor-core path rounds P, dS and dout to the 16-bit type for theirs, as FlashAttention does
     * (its tests bound the difference). att keeps what backward needs, attention_saved floats per
     * layer: each row's log-sum-exp (B,NH,T), fp32. */
    size_t (*attention_saved)(int B, int NH, int T);
    /* floats of device scratch attention_backward needs (per call, covering every thread) */
    size_t (*attention_scratch)(int B, int T, int C, int NH, int NKV, enum dt_dtype at);
    void (*attention_forward)(struct dt_kctx *kc, void *out, float *att, const void *qkv, enum dt_dtype at, int B, int T,
                              int C, int NH, int NKV);
    /* dqkv = ... (written, of type at; a key or value head's gradient summed over its group's query
     * heads in a fixed order, so the bits never vary); dout in fp32 (the projection's dinp); out is
     * the forward's */
    void (*attention_backward)(struct dt_kctx *kc, void *dqkv, const float *dout, const void *qkv, const void *out,
                               const float *att, float *scratch, enum dt_dtype at, int B, int T, int C, int NH,
                               int NKV);
    /* Attention for generation, over a cache of keys and values: qkv (B, n, W) holds n new tokens at
     * positions pos .. pos + n - 1 (attention_forward's layout, queries and keys rotated already).
     * Their key and value heads are first stored into kcache and vcache (B, Tc, NKV, hs), of type
     * at, at rows [pos, pos + n); then out (B, n, C) holds each new query attended over the keys and
     * values of positions 0 .. its own, read from the caches: attention_forward's rows for those
     * queries (scores, softmax and sums in fp32, 16-bit values widened, each result rounded once),
     * up to the order of the sums. pos + n <= Tc, hs <= DT_ATTN_CACHED_HS_MAX; the caches live as long as the caller keeps them. */
    void (*attention_cached)(struct dt_kctx *kc, void *out, const void *qkv, void *kcache, void *vcache,
                             enum dt_dtype at, int B, int n, int pos, int Tc, int C, int NH, int NKV);
    /* GELU, tanh approximation (GPT-2), in fp32 on inp and out of type at; backward writes dinp
     * (=, type at) from the fp32 dout */
    void (*gelu_forward)(struct dt_kctx *kc, void *out, const void *inp, enum dt_dtype at, size_t N);
    void (*gelu_backward)(struct dt_kctx *kc, void *dinp, const void *inp, const float *dout, enum dt_dtype at, size_t N);
    /* out = a + b in fp32: the residual stream (fp32) plus a projection of type bt (autocast's
     * type promotion) */
    void (*residual_forward)(struct dt_kctx *kc, float *out, const float *a, const void *b, enum dt_dtype bt, size_t N);
    /* The embeddings, the token table possibly a block of rows at a time:
     * position_forward: out(B,T,C) = wpe[t]; rows_forward: out[i] += table[inp[i] - v0] for the n
     * tokens in [v0, v0 + nv) (the table holds rows v0..v0+nv-1, of type t: fp32, bf16 or fp16) */
    void (*position_forward)(struct dt_kctx *kc, float *out, const float *wpe, int B, int T, int C);
    void (*rows_forward)(struct dt_kctx *kc, float *out, const int32_t *inp, const void *table, enum dt_dtype t, int v0,
                         int nv, int n, int C);
    /* dwpe[t] += sum over b of dout(b,t) */
    void (*position_backward)(struct dt_kctx *kc, float *dwpe, const float *dout, int B, int T, int C);
    /* A table's gradient, row by row, into whatever range of it dst holds: dst (of type t) holds
     * elements [lo, lo + n) of a (rows, width) table; vals[i] is added to row rows[i] where they
     * overlap. */
    void (*rows_add)(struct dt_kctx *kc, void *dst, enum dt_dtype t, size_t lo, size_t n, const int32_t *rows, const float *vals,
                     int nrows, int width);
    /*
     * Fused softmax + cross-entropy over rows of V. losses(BT) = -log softmax(logits)[target].
     * With dloss != 0, logits are overwritten IN PLACE by dlogits = (softmax - onehot(target)) * dloss,
     * so the (BT,V) buffer is used once (llm.c's fused classifier). Returns the mean loss; with a
     * sink, adds it there instead and returns 0, so that a GPU's host does not wait for it mid-step.
     * The (BT, V) buffer is block-major, so a matmul can fill vb vocabulary columns at a time from
     * contiguous scratch: columns [b*vb, b*vb + n) of every row are one (BT, n) row-major block at
     * offset BT*b*vb (n = vb, or what is left in the last block); vb = V is plain row-major.
     */
    float (*softmax_xent)(struct dt_kctx *kc, float *losses, float *logits, const int32_t *targets, float dloss, int BT,
                          int V, int vb, const struct dt_loss_sink *sink);
    /*
     * The same on logits stored in 16 bits (t: DT_BF16 or DT_F16), as autocast's bf16 LM head hands
     * them to an fp32 cross-entropy: widened, reduced in fp32, dlogits rounded back in place.
     */
    float (*softmax_xent_lp)(struct dt_kctx *kc, float *losses, uint16_t *logits, const int32_t *targets, float dloss, int BT, int V,
                             int vb, enum dt_dtype t, const struct dt_loss_sink *sink);
    /* AdamW on a slice of fp32 parameters with gradient g * gscale + l2 * param, g of type gt (fp32,
     * bf16 or fp16: the strategy's storage, read as it is) (gscale: the clipping factor, folded in to
     * save a pass; l2: Adam's L2 penalty, 0 for AdamW); t is the 1-based step for bias correction;
     * decoupled weight decay wd. With plp not NULL the updated parameters are also written there
     * rounded to pt (mixed precision's 16-bit working copy of fp32 master weights), in the same pass. */
    void (*adamw)(struct dt_kctx *kc, float *param, const void *grad, enum dt_dtype gt, float gscale, float l2, float *m,
                  float *v, size_t n, float lr, float beta1, float beta2, float eps, float wd, int t, void *plp,
                  enum dt_dtype pt);
    /* adamw over ns slices at once, gt, pt and the rest shared: one launch a step on a GPU instead of
     * one a slice (a 124M GPT's step has about 150); the bits of adamw slice by slice. */
    void (*adamw_slices)(struct dt_kctx *kc, const struct dt_adamw_slice *s, int ns, enum dt_dtype gt, float gscale,
                         float lr, float beta1, float beta2, float eps, int t, enum dt_dtype pt);
    /* SGD with momentum (PyTorch's formulation: buf = mu*buf + g; nesterov: g + mu*buf) and decoupled wd;
     * grad, plp and pt as adamw's. */
    void (*sgd)(struct dt_kctx *kc, float *param, const void *grad, enum dt_dtype gt, float gscale, float *buf, size_t n,
                float lr, float momentum, int nesterov, float wd, int first_step, void *plp, enum dt_dtype pt);
    /* Mean squared error over n values; dout = 2 (out - target) * dloss when dloss != 0; a sink as
     * softmax_xent's. */
    float (*mse)(struct dt_kctx *kc, float *dout, const float *out, const float *target, float dloss, size_t n,
                 const struct dt_loss_sink *sink);
    /* sum of squares, in double; number of inf/nan entries (x of type t) */
    double (*sumsq)(struct dt_kctx *kc, const void *x, enum dt_dtype t, size_t n);
    size_t (*nonfinite)(struct dt_kctx *kc, const void *x, enum dt_dtype t, size_t n);
    /* A step's gradient check in one read of each part (type t): the squares of the parts that count
     * them, summed in double in the parts' order, returned, and the inf/nan count of every part into
     * *bad. A GPU waits for the device once for all of them, not once a part. */
    double (*sumsq_parts)(struct dt_kctx *kc, const struct dt_norm_part *parts, int nparts, enum dt_dtype t,
                          size_t *bad);
    /* Between buffers of fp32, bf16 and fp16 (any two types): dst = src converted; dst += src (the sum
     * in fp32, rounded once). */
    void (*convert)(struct dt_kctx *kc, void *dst, enum dt_dtype dt, const void *src, enum dt_dtype st, size_t n);
    void (*accumulate)(struct dt_kctx *kc, void *dst, enum dt_dtype dt, const void *src, enum dt_dtype st, size_t n);
    /* In place, without a second buffer: n fp32 values become n 16-bit ones at the buffer's start,
     * and back. */
    void (*narrow_inplace)(struct dt_kctx *kc, void *buf, size_t n, enum dt_dtype t);
    void (*widen_inplace)(struct dt_kctx *kc, void *buf, size_t n, enum dt_dtype t);
    /* bf16 from fp32, rounded up with probability (x - lower) / (upper - lower) (llm.c's AdamW);
     * the noise of element i comes from (seed, index0 + i), so whichever rank rounds it gets the
     * same bits. */
    void (*round_stochastic)(struct dt_kctx *kc, uint16_t *dst, const float *src, size_t n, uint64_t seed, uint64_t index0);
};

/* a copy with nothing to wait for */
#define DT_NO_TICKET UINT64_MAX

/* op (the table's copy_async or copy_inline) where the table has it, else a copy now (DT_NO_TICKET) */
static inline uint64_t dt_copy_or_now(uint64_t (*op)(struct dt_kctx *, void *, const void *, size_t, enum dt_copy_kind),
                                      const struct dt_kernels *k, struct dt_kctx *kc, void *dst, const void *src,
                                      size_t bytes, enum dt_copy_kind kind)
{
    if (!bytes) return DT_NO_TICKET;
    if (op) return op(kc, dst, src, bytes, kind);
    k->copy(kc, dst, src, bytes, kind);
    return DT_NO_TICKET;
}
static inline uint64_t dt_copy_async(const struct dt_kernels *k, struct dt_kctx *kc, void *dst, const void *src,
                                     size_t bytes, enum dt_copy_kind kind)
{
    return dt_copy_or_now(k->copy_async, k, kc, dst, src, bytes, kind);
}
static inline uint64_t dt_copy_inline(const struct dt_kernels *k, struct dt_kctx *kc, void *dst, const void *src,
                                      size_t bytes, enum dt_copy_kind kind)
{
    return dt_copy_or_now(k->copy_inline, k, kc, dst, src, bytes, kind);
}
static inline void dt_copy_wait(const struct dt_kernels *k, struct dt_kctx *kc, uint64_t ticket, bool host)
{
    if (ticket != DT_NO_TICKET && k->copy_wait) k->copy_wait(kc, ticket, host);
}

extern const struct dt_kernels dt_kernels_cpu;
/* over the CUDA module (cuda_table.c), in builds with CUDA */
extern const struct dt_kernels dt_kernels_cuda;

/* Threads the shared pool runs with. */
int dt_kernels_threads(void);

#endif
