/*
 * peak.h - a GPU's peak dense rate for a precision, from its name, for MFU: NVIDIA's data-sheet
 * figures without structured sparsity, tensor cores for bf16 and fp16 (fp32 accumulation), the
 * plain fp32 rate for 32-true (dtrun never uses TF32). bench/gpu.sh has the bf16 rates of the
 * devices it names.
 */
#ifndef DT_PEAK_H
#define DT_PEAK_H

#include "core/dtype.h"

/* TFLOP/s of one device named `name` (cudaGetDeviceProperties' name) computing in `compute`
 * (DT_F32, DT_BF16, DT_F16); 0 when the name is not in the table (events.peak_tflops then says). */
double dt_peak_tflops(const char *name, enum dt_dtype compute);

#endif
