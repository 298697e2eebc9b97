/*
 * cuda_module.h - finding and loading the CUDA module (kernels/cuda/module.h)
 * on first use. Only what needs a GPU calls it: compute.device cuda, auto on
 * a machine with an NVIDIA driver, `dtrun info` and `--version`.
 *
 * Where it is looked for, first match only:
 *   DTRUN_CUDA_MODULE      a path, when set (tests; unusual installs)
 *   the build tree         when the running program lives in the build tree
 *   pkglibdir              $(libdir)/dtrun/dtrun_cuda.so, where make install puts it
 */
#ifndef DT_CUDA_MODULE_H
#define DT_CUDA_MODULE_H

#include "core/status.h"
#include "kernels/cuda/module.h"

/* The module, loaded once; a failure (missing file, unloadable, another version) says which
 * path and why, and is the same on every call. */
dt_status_t dt_cuda_module_get(const struct dt_cuda_module **out);

#endif
