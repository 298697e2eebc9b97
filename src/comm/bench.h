/*
 * bench.h - `dtrun bench comm`: all-reduce bus bandwidth through dtrun's
 * communicator (synchronous and started-then-waited, as DDP uses it) next to
 * the backend's own call (plain MPI_Allreduce) in the same run, for 1 KiB to
 * 256 MiB. busbw = algbw x 2(n-1)/n, as nccl-tests reports it.
 */
#ifndef DT_COMM_BENCH_H
#define DT_COMM_BENCH_H

#include <stdio.h>
#include "comm/comm.h"

/* Every rank calls it; rank 0 prints the table to out. */
dt_status_t dt_comm_bench(struct dt_comm *c, size_t max_bytes, int rounds, FILE *out);

#endif
