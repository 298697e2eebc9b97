/*
 * vmath.h - let loops over expf vectorize without -ffast-math. glibc's libmvec
 * has vector expf for SSE, AVX2 and AVX-512 (a few ulp), but math.h declares
 * them only under __FAST_MATH__, whose reassociation we must not have (it
 * breaks GeLU: llm.c #168). Declaring the simd variant here is enough for GCC
 * to call them; DT_CLONES compiles the hot loops for AVX-512 and AVX2 too,
 * chosen at load time, with the baseline kept for other CPUs. Without libmvec
 * (aarch64's glibc 2.36 has none) the loops call scalar expf.
 */
#ifndef DT_VMATH_H
#define DT_VMATH_H

#include <math.h>
#include "dt_build_config.h"

#ifdef HAVE_LIBMVEC
__attribute__((simd("notinbranch"))) float expf(float);
#endif

/* not under ASan, nor with clang (the fuzz build, #16): clang 14 names the dispatcher <name>.ifunc,
 * so calls from other files find no <name> to link to */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__clang__)
#define DT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DT_CLONES
#endif

#endif
