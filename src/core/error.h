/*
 * error.h - the message that goes with a failing dt_status_t.
 *
 * A failing function records what failed, where and how to fix it, then returns
 * the status; the one place that exits (src/dtrun.c) prints the message. The
 * buffer is per thread, so a sender or watchdog thread cannot clobber it.
 *
 * Message shape (compiler style, so editors can jump to the place):
 *     WHERE: error: WHAT
 *       hint: HOW TO FIX
 * WHERE is "file:line:col" or a plain subject such as "dtrun" or "rank 3".
 */
#ifndef DT_ERROR_H
#define DT_ERROR_H

#include <stdarg.h>
#include "core/status.h"

#define DT_ERROR_MAX 8192

/* Replace the current message; returns `status` so callers can `return dt_error(...)`. */
dt_status_t dt_error(dt_status_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same call, its result spelled out where it is made: GCC's analyzer (-fanalyzer, one file at
 * a time) otherwise follows `return dt_error(DT_ERR_..., ...)` as if it could return DT_SUCCESS,
 * and reports the out-parameters a failure leaves unset (#16). */
#define dt_error(status, ...)                          \
    __extension__({                                     \
        dt_status_t dt_error_st_ = (status);            \
        (dt_error)(dt_error_st_, __VA_ARGS__);          \
        dt_error_st_;                                   \
    })
dt_status_t dt_verror(dt_status_t status, const char *fmt, va_list ap);
/* Append a line to the current message (for hints and multi-part errors). */
void dt_error_append(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *dt_error_msg(void);
void dt_error_clear(void);

#endif
