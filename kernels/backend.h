/*
 * backend.h - what the kernel backends compiled into this binary can report
 * before any model exists: GPUs visible, versions. The op table arrives with
 * kernels.h; registration (backend_reg.c) is the one place with #ifdef.
 */
#ifndef DT_BACKEND_H
#define DT_BACKEND_H

#include <stddef.h>

/* GPUs this process can use; 0 with why[] filled when none (or no CUDA build). */
int dt_backend_gpu_count(char *why, size_t n);
/* One line per compiled-in kernel backend, for `dtrun --version`. */
void dt_backend_describe(char *buf, size_t n);

#endif
