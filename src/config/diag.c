/* diag.c - see diag.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/diag.h"
#include "core/error.h"

const char *dt_loc_str(struct dt_loc loc, char *buf, size_t n)
{
    if (loc.line > 0) snprintf(buf, n, "%s:%d:%d", loc.file, loc.line, loc.col);
    else snprintf(buf, n, "%s", loc.file ? loc.file : "dtrun");
    return buf;
}

static void append(struct dt_diags *d, const char *s)
{
    size_t add = strlen(s);
    char *t = realloc(d->text, d->len + add + 2);
    if (!t) return;
    d->text = t;
    if (d->len) d->text[d->len++] = '\n';
    memcpy(d->text + d->len, s, add + 1);
    d->len += add;
}

void dt_diag(struct dt_diags *d, struct dt_loc loc, const char *hint, const char *fmt, ...)
{
    if (++d->n > DT_DIAG_MAX) return;
    char where[512], what[2048], line[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "%s: error: %s", dt_loc_str(loc, where, sizeof where), what);
    append(d, line);
    if (hint) {
        snprintf(line, sizeof line, "  hint: %s", hint);
        append(d, line);
    }
}

dt_status_t dt_diag_finish(struct dt_diags *d)
{
    if (d->n == 0) {
        free(d->text);
        *d = (struct dt_diags){0};
        return DT_SUCCESS;
    }
    dt_error(DT_ERR_CONFIG, "%s", d->text);
    if (d->n > DT_DIAG_MAX) dt_error_append("(%d more errors not shown)", d->n - DT_DIAG_MAX);
    free(d->text);
    *d = (struct dt_diags){0};
    return DT_ERR_CONFIG;
}
