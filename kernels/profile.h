/*
 * profile.h - where a step's time goes, op by op (events.wall_clock_breakdown): a kernel table
 * that runs another one's ops and adds up each one's wall time and calls. The names are the
 * table's slots, so the direction is in them (matmul_forward, matmul_backward, ...). Each op is
 * timed from the moment the device has run everything queued before it until it has run the op
 * (the table's wait slot), so on a GPU the times are device times, with the ops serialized.
 */
#ifndef DT_KPROFILE_H
#define DT_KPROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include "kernels/kernels.h"

#define DT_KPROFILE_MAX 64

struct dt_kprofile {
    int n;
    const char *name[DT_KPROFILE_MAX];
    double secs[DT_KPROFILE_MAX];  /* since the caller last zeroed them (a metrics interval) */
    double total[DT_KPROFILE_MAX]; /* since the wrap */
    int64_t calls[DT_KPROFILE_MAX], calls_total[DT_KPROFILE_MAX]; /* the same two ways */
};

/* Replace *k and *kc (a context *k made) by the profiling table and its context; destroying that
 * context destroys the inner one. */
dt_status_t dt_kprofile_wrap(const struct dt_kernels **k, struct dt_kctx **kc);
/* The sums of a context dt_kprofile_wrap made. */
struct dt_kprofile *dt_kprofile_of(struct dt_kctx *kc);
/* While paused, ops run and are not timed: what the run does outside its steps (validation, a
 * checkpoint's copies), which its step time leaves out too. */
void dt_kprofile_pause(struct dt_kctx *kc, bool paused);

#endif
