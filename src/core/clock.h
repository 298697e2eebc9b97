/* clock.h - seconds on CLOCK_MONOTONIC, for timings and deadlines (never the wall clock). */
#ifndef DT_CLOCK_H
#define DT_CLOCK_H

#include <time.h>

static inline double dt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
