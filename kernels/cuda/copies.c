/*
 * copies.c - see copies.h. The copies run on a stream of their own; each is queued after an event
 * recorded on the calling thread's compute stream (cudaStreamPerThread: the kernels', compiled with
 * --default-stream per-thread), so it copies what the kernels queued before it wrote, and an event
 * recorded after it marks its end. Tickets count the copies; ticket t's event is slot t % RING of a
 * ring. A slot reused by a later copy marks a later end on the same stream, which comes after t's,
 * so waiting on it is waiting for t and a little more: never too little. The inline copies run on
 * the compute stream itself and count in a ring of their own: a slot of one ring reused by a copy
 * on the other stream could end before the copy it stood for.
 */
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdlib.h>
#include "kernels/cuda/copies.h"

#define RING 256

/* enum dt_copy_kind's, in order */
static const enum cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};

struct dt_cuda_copies {
    cudaStream_t stream;
    cudaEvent_t before;      /* recorded on the compute stream ahead of each copy */
    cudaEvent_t done[RING];  /* the copies' ends */
    uint64_t next;           /* the next copy's ticket */
    cudaEvent_t inline_done[RING]; /* the inline copies' ends, on the compute stream */
    uint64_t next_inline;          /* the next inline copy's ticket, less DT_CUDA_INLINE */
};

int dt_cuda_copies_create(struct dt_cuda_copies **out)
{
    struct dt_cuda_copies *c = calloc(1, sizeof *c);
    *out = NULL;
    if (!c) return (int)cudaErrorMemoryAllocation;
    cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->before, cudaEventDisableTiming);
    for (int i = 0; i < RING && e == cudaSuccess; i++) e = cudaEventCreateWithFlags(&c->done[i], cudaEventDisableTiming);
    for (int i = 0; i < RING && e == cudaSuccess; i++)
        e = cudaEventCreateWithFlags(&c->inline_done[i], cudaEventDisableTiming);
    if (e != cudaSuccess) {
        dt_cuda_copies_destroy(c);
        return (int)e;
    }
    *out = c;
    return 0;
}

void dt_cuda_copies_destroy(struct dt_cuda_copies *c)
{
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->next_inline) cudaStreamSynchronize(cudaStreamPerThread);
    for (int i = 0; i < RING; i++) {
        if (c->done[i]) cudaEventDestroy(c->done[i]);
        if (c->inline_done[i]) cudaEventDestroy(c->inline_done[i]);
    }
    if (c->before) cudaEventDestroy(c->before);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

int dt_cuda_copy_async(struct dt_cuda_copies *c, void *dst, const void *src, size_t bytes, int kind, uint64_t *ticket)
{
    *ticket = UINT64_MAX;
    if (kind < 0 || kind > 2) return (int)cudaErrorInvalidValue;
    uint64_t t = c->next++;
    cudaError_t e = cudaEventRecord(c->before, cudaStreamPerThread);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(c->stream, c->before, 0);
    if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, kinds[kind], c->stream);
    if (e == cudaSuccess) e = cudaEventRecord(c->done[t % RING], c->stream);
    /* a failed copy names nothing to wait for: the stream's copies, this one's and those before it
     * whose tickets the caller may no longer wait for, settled here */
    if (e != cudaSuccess) cudaStreamSynchronize(c->stream);
    *ticket = e == cudaSuccess ? t : UINT64_MAX;
    return (int)e;
}

int dt_cuda_copy_inline(struct dt_cuda_copies *c, void *dst, const void *src, size_t bytes, int kind, uint64_t *ticket)
{
    *ticket = UINT64_MAX;
    if (kind < 0 || kind > 2) return (int)cudaErrorInvalidValue;
    uint64_t t = c->next_inline++;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kinds[kind], cudaStreamPerThread);
    if (e == cudaSuccess) e = cudaEventRecord(c->inline_done[t % RING], cudaStreamPerThread);
    if (e != cudaSuccess) cudaStreamSynchronize(cudaStreamPerThread); /* as copy_async's failure */
    *ticket = e == cudaSuccess ? t | DT_CUDA_INLINE : UINT64_MAX;
    return (int)e;
}

int dt_cuda_copy_wait(struct dt_cuda_copies *c, uint64_t ticket, int host)
{
    bool in = ticket & DT_CUDA_INLINE;
    uint64_t t = ticket & ~DT_CUDA_INLINE;
    if (t >= (in ? c->next_inline : c->next)) return (int)cudaErrorInvalidValue;
    cudaEvent_t ev = in ? c->inline_done[t % RING] : c->done[t % RING];
    return (int)(host ? cudaEventSynchronize(ev) : cudaStreamWaitEvent(cudaStreamPerThread, ev, 0));
}
