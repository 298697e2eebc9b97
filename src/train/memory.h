/*
 * memory.h - `dtrun check --memory`: the model state each rank will hold under
 * this config, for every ZeRO stage, computed the way the engine allocates it
 * (engine.h), next to DeepSpeed's formulas (the ZeRO paper: p bytes of
 * parameters, g of gradients, K of optimizer state per parameter, Ψ
 * parameters, N ranks: DDP (p+g+K)Ψ, ZeRO-1 (p+g)Ψ + KΨ/N, ZeRO-2 pΨ +
 * (g+K)Ψ/N, ZeRO-3 (p+g+K)Ψ/N; mixed-precision Adam: p = g = 2, K = 12).
 */
#ifndef DT_MEMORY_H
#define DT_MEMORY_H

#include <stdio.h>
#include "config/config.h"

dt_status_t dt_memory_estimate(const struct dt_config *cfg, FILE *out);

#endif
