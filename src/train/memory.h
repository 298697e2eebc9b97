/*
 * memory.h - what each rank of a config holds, computed as the run allocates it, before anything is:
 * `dtrun check --memory` prints it, a run whose node cannot hold it is refused with the numbers, and
 * a run warns when its measured peak passes it by more than 10%.
 *
 * Per rank, on the device (a GPU's memory; a CPU run's is the host's): the model state as the
 * strategy keeps it (engine.h: parameters, gradients, fp32 master weights, optimizer state, the units
 * gathered at once, its workspace), the activations at the micro-batch (with checkpointing when it
 * is on), the embedding rows every rank's backward sends, and the kernels' scratch (a CPU's widened
 * 16-bit operands; the CUDA module's partial sums, rounded weights and FP8 codes: kernels/cuda/plan.h's
 * dt_cuda_scratch_bytes), and a GPU's CUDA context and library workspaces. On the host: what is offloaded
 * (offload_optimizer: fp32 master weights, moments and gradients, pinned), the checkpoint's copy
 * (pinned on a GPU), the initial parameters' staging, and the process itself. Per node: the ranks'
 * host memory together.
 *
 * The stage table beside it is the model state under every ZeRO stage next to DeepSpeed's formulas
 * (the ZeRO paper: p bytes of parameters, g of gradients, K of optimizer state per parameter, Psi
 * parameters, N ranks: DDP (p+g+K)Psi, ZeRO-1 (p+g)Psi + KPsi/N, ZeRO-2 pPsi + (g+K)Psi/N, ZeRO-3
 * (p+g+K)Psi/N; mixed-precision Adam: p = g = 2, K = 12).
 */
#ifndef DT_MEMORY_H
#define DT_MEMORY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "config/config.h"
#include "strategy/engine.h"

struct dt_memory_plan {
    bool gpu;                       /* the device is a GPU (else the host: a CPU run) */
    int ranks_per_node;
    struct dt_mem_report state;     /* the strategy's, on the device (master and optimizer: on the host
                                     * when offloaded) */
    int64_t activations, rows, scratch, runtime; /* device: arena and tokens, embedding rows, kernels' scratch,
                                                  * the GPU runtime (CUDA context, cuBLASLt's workspace) */
    int64_t offloaded, ckpt_copy, staging, process; /* host */
    int64_t device, host;           /* per rank: the device's sum; the host's (a CPU run's: everything) */
    int64_t pinned;                 /* of the host's, page-locked (a GPU run's offloaded state and staging) */
    int64_t node;                   /* the node's ranks' host memory */
};

/* The plan for rank 0 of cfg (every rank holds the same to within one piece's rounding). */
dt_status_t dt_memory_plan(const struct dt_config *cfg, struct dt_memory_plan *p);
/* The plan as `dtrun check --memory` prints it, then the stage table; device_capacity (bytes, 0:
 * unknown) is a GPU's memory to measure the device peak against. */
dt_status_t dt_memory_estimate(const struct dt_config *cfg, uint64_t device_capacity, FILE *out);
/* The memory this node gives the job: Slurm's --mem (SLURM_MEM_PER_NODE), or --mem-per-cpu times the
 * node's CPUs, else the host's MemAvailable; *what says which. 0 when none is known. */
int64_t dt_memory_node_limit(char *what, size_t n);
/* "41.3 MiB of device memory, " for a log line */
const char *dt_memory_device_str(const struct dt_memory_plan *p, char *buf, size_t n);
/* A run refused before its first allocation when its node cannot hold it: the plan's numbers, the
 * limit and where it came from, and what to change. */
dt_status_t dt_memory_check_node(const struct dt_config *cfg, const struct dt_memory_plan *p);

#endif
