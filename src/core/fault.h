/*
 * fault.h - the one fault-injection point: tests make a rank fail in a chosen
 * way at a chosen step, and the code that would meet the fault asks here.
 *
 *   DTRUN_FAULT=KIND@STEP[:RANK][,KIND@STEP[:RANK]...]
 *
 * STEP counts from 1, as the metrics do; RANK defaults to 0. Kinds:
 *   grad_inf  an inf in that rank's reduced gradient (an fp16 overflow that one rank sees)
 *   kill      the rank sends itself SIGKILL as the step starts (a node lost, the OOM killer)
 *   stall     the rank stops before its first collective of the step and never gets there
 *             (a hung rank: the others' watchdog must name it)
 *   enospc    the rank's checkpoint file of that step fails to write with ENOSPC (a full disk)
 *   kill_save the rank sends itself SIGKILL halfway through writing its checkpoint file of that
 *             step (a crash mid-save)
 * A malformed value is refused at start (exit 2), never ignored.
 */
#ifndef DT_FAULT_H
#define DT_FAULT_H

#include <stdbool.h>
#include <stdint.h>
#include "core/status.h"

enum dt_fault { DT_FAULT_GRAD_INF, DT_FAULT_KILL, DT_FAULT_STALL, DT_FAULT_ENOSPC, DT_FAULT_KILL_SAVE, DT_FAULT_NKINDS };

/* Read DTRUN_FAULT (once, at start). */
dt_status_t dt_fault_init(void);
/* Whether fault f is asked for at step (1-based) on rank. */
bool dt_fault_hit(enum dt_fault f, int64_t step, int rank);
/* For faults with no step of their own to return to: never returns. */
_Noreturn void dt_fault_stall_forever(void);

#endif
