/* softmax_xent.c - fused softmax + cross-entropy with the gradient written in place (see kernels.h). */
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

DT_CLONES float dt_cpu_softmax_xent(float *losses, float *logits, const int32_t *targets, float dloss, int BT, int V)
{
    #pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        float *row = logits + (size_t)i * V;
        float mx = -INFINITY;
        #pragma omp simd reduction(max : mx)
        for (int v = 0; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        double sum = 0;
        #pragma omp simd reduction(+ : sum)
        for (int v = 0; v < V; v++) sum += expf(row[v] - mx);
        float lse = mx + (float)log(sum);
        int y = targets[i];
        losses[i] = lse - row[y];
        if (dloss != 0) {
            #pragma omp simd
            for (int v = 0; v < V; v++) row[v] = expf(row[v] - lse) * dloss;
            row[y] -= dloss;
        }
    }
    double mean = 0;
    for (int i = 0; i < BT; i++) mean += losses[i];
    return (float)(mean / BT);
}
