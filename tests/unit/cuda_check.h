/*
 * cuda_check.h - what the GPU test programs (test_cuda_ops, test_cuda_attention, test_cuda_fp8) share
 * (cuda_check.c): the module's ops and a CPU context to hold them against, TAP lines, device
 * buffers, and the comparisons of fp32 and 16-bit results.
 */
#ifndef DT_CUDA_CHECK_H
#define DT_CUDA_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "core/dtype.h"
#include "kernels/cuda_module.h"
#include "kernels/kernels.h"

extern const struct dt_cuda_ops *gpu;
extern struct dt_kctx *kc; /* the CPU twins' context */
extern void *mm;           /* the module's context, for the ops that take one outside the matmul tests */
extern int tap_n, failed;
extern const char *report_prefix; /* before every report's words */
extern const enum dt_dtype act_types[3];
/* fp32's unit roundoff, 2^-24: the error bounds' u */
#define U32 (1.0 / 16777216.0)

/* every call checked: a launch that never started would leave the buffers as they were */
#define CK(call)                                                                                                       \
    do {                                                                                                               \
        int e_ = (call);                                                                                               \
        if (e_) {                                                                                                      \
            printf("Bail out! %s: %s\n", #call, gpu->error_string(e_));                                                \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

void report(int ok, const char *what, double got);
float *randn(size_t n, unsigned seed);
void *dev(const void *host, size_t bytes);
float *back(const void *d, size_t n);
double maxrel(const float *a, const float *b, size_t n);
double wide16(uint16_t h, enum dt_dtype t);
double lp_excess(const uint16_t *got, const uint16_t *ref, size_t n, enum dt_dtype t);
/* |got[i] - ref[i]| of type t, less (16-bit) the spacing above the larger of the two: what two
 * roundings of nearby fp32 values leave to explain (may be negative) */
double off_less_ulp(const void *got, const void *ref, size_t i, enum dt_dtype t);
void *typed(const float *x, size_t n, enum dt_dtype t);
double act_diff(const void *got, const void *ref, size_t n, enum dt_dtype t);
void *back_typed(const void *d, size_t n, enum dt_dtype t);
int ulps(uint16_t a, uint16_t b);
int max_ulps(const uint16_t *a, const uint16_t *b, size_t n);
/* The module, GPU 0 and both contexts: 0, or the exit status to return (77 where no module or no
 * GPU is, said as TAP's skip; 1 when they cannot start) */
int cuda_check_start(void);
/* the plan line; the exit status: 1 when a test failed */
int cuda_check_finish(void);

#endif
