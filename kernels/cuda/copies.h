/*
 * copies.h - copies beside the kernels (kernels.h's copy_async and copy_wait): ZeRO-Offload's
 * gradients going down to the host and updated weights coming back up while the device computes, a
 * micro-batch's tokens going up without the host waiting for the device.
 */
#ifndef DT_CUDA_COPIES_H
#define DT_CUDA_COPIES_H

#include <stddef.h>
#include <stdint.h>

struct dt_cuda_copies;

int dt_cuda_copies_create(struct dt_cuda_copies **out);
void dt_cuda_copies_destroy(struct dt_cuda_copies *c);
/* kind: kernels.h's enum dt_copy_kind (0 to the device, 1 to the host, 2 on the device). A failure's
 * ticket is UINT64_MAX, nothing to wait for: a copy that was queued has ended when it returns. */
int dt_cuda_copy_async(struct dt_cuda_copies *c, void *dst, const void *src, size_t bytes, int kind, uint64_t *ticket);
/* A copy on the calling thread's compute stream, in order with the kernels, its end an event of a
 * second ring; its ticket carries DT_CUDA_INLINE, so that copy_wait tells the two rings apart. A
 * failure's ticket is UINT64_MAX, as copy_async's. */
#define DT_CUDA_INLINE ((uint64_t)1 << 62)
int dt_cuda_copy_inline(struct dt_cuda_copies *c, void *dst, const void *src, size_t bytes, int kind, uint64_t *ticket);
int dt_cuda_copy_wait(struct dt_cuda_copies *c, uint64_t ticket, int host);

#endif
