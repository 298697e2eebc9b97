/* error.c - per-thread error message buffer (see error.h). */
#include <stdio.h>
#include <string.h>
#include "core/error.h"

static _Thread_local char msg[DT_ERROR_MAX];

dt_status_t dt_verror(dt_status_t status, const char *fmt, va_list ap)
{
    vsnprintf(msg, sizeof msg, fmt, ap);
    return status;
}

dt_status_t (dt_error)(dt_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dt_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

void dt_error_append(const char *fmt, ...)
{
    size_t len = strlen(msg);
    if (len + 2 >= sizeof msg) return;
    if (len > 0) msg[len++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + len, sizeof msg - len, fmt, ap);
    va_end(ap);
}

const char *dt_error_msg(void) { return msg; }

void dt_error_clear(void) { msg[0] = '\0'; }
