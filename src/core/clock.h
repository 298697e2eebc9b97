/*
 * clock.h - the two clocks dtrun reads. dt_now: seconds on CLOCK_MONOTONIC, for every timing,
 * interval, backoff and deadline; it never jumps. dt_wall_now: the wall clock, only for times
 * people or receivers read (event times, a checkpoint's saved_at, a lock's since, a signature's
 * timestamp); it jumps when the system clock is stepped, and DTRUN_FAULT's clock faults move it the
 * same way (fault.h), so the tests can check that nothing timed reads it.
 */
#ifndef DT_CLOCK_H
#define DT_CLOCK_H

#include <time.h>
#include "core/fault.h"

static inline double dt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline struct timespec dt_wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)dt_fault_wall_offset();
    return ts;
}

#endif
