/*
 * diag.h - collect config errors so one run of `dtrun check` reports all of
 * them (up to DT_DIAG_MAX), each as "file:line:col: error: key: what" + hint.
 */
#ifndef DT_DIAG_H
#define DT_DIAG_H

#include "config/ynode.h"
#include "core/status.h"

#define DT_DIAG_MAX 20

struct dt_diags {
    int n;
    char *text; /* malloc'd, grows */
    size_t len;
};

void dt_diag(struct dt_diags *d, struct dt_loc loc, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Move the collected errors into the error buffer; DT_SUCCESS when there were none. */
dt_status_t dt_diag_finish(struct dt_diags *d);
/* "file:line:col" (or the bare label when the line is unknown) into buf. */
const char *dt_loc_str(struct dt_loc loc, char *buf, size_t n);

#endif
