/*
 * fault.h - the one fault-injection point: tests make a rank fail in a chosen
 * way at a chosen step, and the code that would meet the fault asks here.
 *
 *   DTRUN_FAULT=KIND@STEP[:RANK][,KIND@STEP[:RANK]...]
 *
 * STEP counts from 1, as the metrics do; RANK defaults to 0. For kill, stop, stall, spool_* and
 * clock_*, STEP one past the run's last step means at exit: after the last step's update, as its
 * final save begins; the save kinds name the step whose save they hit (the final save's is the last
 * step). tests/cli/faults.sh (run by test_faults_{process,storage,webhook}.sh) drives every kind.
 * Kinds:
 *   grad_inf     an inf in that rank's reduced gradient (an fp16 overflow that one rank sees)
 *   kill         the rank sends itself SIGKILL as the step starts (a node lost, the OOM killer)
 *   stop         the rank sends itself SIGSTOP as the step starts (a process frozen: a debugger,
 *                a stuck page fault, `kill -STOP`): it never answers again, the others' watchdog
 *                must name it
 *   stall        the rank stops before its first collective of the step and never gets there
 *                (a hung rank: the others' watchdog must name it)
 *   enospc       the rank's checkpoint file of that step fails to write with ENOSPC (a full disk)
 *   eio          the same with EIO (a failing disk or a file server gone)
 *   kill_save    the rank sends itself SIGKILL halfway through writing its checkpoint file of that
 *                step (a crash mid-save)
 *   stop_save    the rank sends itself SIGSTOP at the same point
 *   stall_save   the rank stops before the first collective that finishes its save of that step
 *                (the checkpoint's commit) and never gets there
 *   spool_enospc every write of the rank's webhook spool fails with ENOSPC while the rank is at that
 *                step (the spool is written only while the endpoint does not take events)
 *   spool_eio    the same with EIO
 *   clock_fwd    the wall clock the rank reads (dt_wall_now: event times, saved_at, signatures)
 *                jumps 1 h ahead as the step starts (NTP stepping a clock, an admin's date -s);
 *                CLOCK_MONOTONIC, which every timeout and interval reads, does not move
 *   clock_back   the same, 1 h back
 *   slow         from that step on, the rank sleeps 10 ms as each step starts (a straggler: a
 *                throttled or shared core); training is slower, not different, so a test can keep
 *                a run going for a wall-clock while (a Slurm time limit) at no cost in CPU
 *   nomem        from that step on, every request for the rank's CPU kernel scratch fails, as
 *                malloc does under memory pressure: the op that asked returns, and the step ends
 *                with the error that names it and the bytes
 *   hog          the rank takes 256 MiB of host memory more than it planned as the step starts
 *                (a leak, a library's buffers): the run's end says its peak passed the plan
 *   fp8_jump     fp8-mixed: every FP8 scale of the rank is multiplied by 2^12 as the step starts,
 *                so that the step's tensors overflow their ranges (a loss spike's activations meeting
 *                delayed scaling): the run must clip, say so, and recover its scales
 * A malformed value is refused at start (exit 2), never ignored.
 */
#ifndef DT_FAULT_H
#define DT_FAULT_H

#include <stdbool.h>
#include <stdint.h>
#include "core/status.h"

enum dt_fault {
    DT_FAULT_GRAD_INF, DT_FAULT_KILL, DT_FAULT_STOP, DT_FAULT_STALL, DT_FAULT_ENOSPC, DT_FAULT_EIO,
    DT_FAULT_KILL_SAVE, DT_FAULT_STOP_SAVE, DT_FAULT_STALL_SAVE, DT_FAULT_SPOOL_ENOSPC, DT_FAULT_SPOOL_EIO,
    DT_FAULT_CLOCK_FWD, DT_FAULT_CLOCK_BACK, DT_FAULT_SLOW, DT_FAULT_NOMEM, DT_FAULT_HOG, DT_FAULT_FP8_JUMP,
    DT_FAULT_NKINDS
};

/* Read DTRUN_FAULT (once, at start). */
dt_status_t dt_fault_init(void);
/* Whether fault f is asked for at step (1-based) on rank. */
bool dt_fault_hit(enum dt_fault f, int64_t step, int rank);
/* Whether fault f is asked for at step or an earlier one on rank (the faults that last: slow). */
bool dt_fault_since(enum dt_fault f, int64_t step, int rank);
/* Where this rank is, for the code that has no step of its own (the spool, the wall clock): the
 * trainer says so as each step starts (steps + 1 at exit). A clock fault of that step applies here. */
void dt_fault_at(int64_t step, int rank);
/* Whether fault f is asked for where dt_fault_at last put this rank (never before the first step). */
bool dt_fault_now(enum dt_fault f);
/* The same for the faults that last (nomem): asked for at that step or an earlier one. */
bool dt_fault_now_since(enum dt_fault f);
/* Seconds the clock faults have moved the wall clock by (0 without them). */
int64_t dt_fault_wall_offset(void);
/* For faults with no step of their own to return to: never returns. */
_Noreturn void dt_fault_stall_forever(void);

#endif
