/* swiglu.c - SwiGLU, Llama's MLP activation: silu(gate) * up from one (BT, 2H) matmul output. */
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"
#include "kernels/formulas.h"

/* k gates and ups of a row, widened, and the row's fp32 dout from the same column (backward) */
typedef void (*chunk_fn)(float *g, float *u, const float *dy, int k);

/* Every row's gate and up halves DT_CPU_CHUNK columns at a time through f; then g rounded into out
 * (BT, H), or (backward) g and u into out's two halves (BT, 2H). */
static void chunks(void *out, const void *inp, const float *dout, enum dt_dtype at, int BT, int H, chunk_fn f)
{
    #pragma omp parallel
    {
        float g[DT_CPU_CHUNK], u[DT_CPU_CHUNK];
        #pragma omp for
        for (int r = 0; r < BT; r++)
            for (int c0 = 0; c0 < H; c0 += DT_CPU_CHUNK) {
                int k = H - c0 < DT_CPU_CHUNK ? H - c0 : DT_CPU_CHUNK;
                size_t row = (size_t)r * 2 * H;
                dt_cpu_load(g, inp, at, row + c0, (size_t)k);
                dt_cpu_load(u, inp, at, row + H + c0, (size_t)k);
                f(g, u, dout ? dout + (size_t)r * H + c0 : NULL, k);
                if (!dout) {
                    dt_cpu_store(out, at, (size_t)r * H + c0, g, (size_t)k);
                    continue;
                }
                dt_cpu_store(out, at, row + c0, g, (size_t)k);
                dt_cpu_store(out, at, row + H + c0, u, (size_t)k);
            }
    }
}

DT_CLONES static void forward_chunk(float *g, float *u, const float *dy, int k)
{
    #pragma omp simd
    for (int i = 0; i < k; i++) g[i] = dt_silu(g[i]) * u[i];
}

/* dgate = dout up silu'(gate), dup = dout silu(gate) */
DT_CLONES static void backward_chunk(float *g, float *u, const float *dy, int k)
{
    #pragma omp simd
    for (int i = 0; i < k; i++) {
        float gi = g[i];
        g[i] = dy[i] * u[i] * dt_silu_grad(gi);
        u[i] = dy[i] * dt_silu(gi);
    }
}

void dt_cpu_swiglu_forward(struct dt_kctx *kc, void *out, const void *inp, enum dt_dtype at, int BT, int H)
{
    chunks(out, inp, NULL, at, BT, H, forward_chunk);
}

void dt_cpu_swiglu_backward(struct dt_kctx *kc, void *dinp, const void *inp, const float *dout, enum dt_dtype at,
                            int BT, int H)
{
    chunks(dinp, inp, dout, at, BT, H, backward_chunk);
}
