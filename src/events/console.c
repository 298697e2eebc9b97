/* console.c - the console sink: the progress line of metrics records (rewritten in place on a
 * terminal, one line per record otherwise) and one line for the other records worth a look. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/error.h"
#include "core/log.h"
#include "events/events.h"

struct console {
    struct dt_sink sink;
    bool tty, open_line; /* a progress line without its newline yet */
};

static void end_line(struct console *c)
{
    if (c->open_line) fputc('\n', stderr);
    c->open_line = false;
}

/* A sample's text for a terminal: control characters (a young byte-level model's output) shown as
 * \xNN, so that they neither move the cursor nor end the line; newlines and tabs kept. NULL: no memory. */
static char *printable(const char *t)
{
    size_t n = strlen(t), o = 0;
    char *out = malloc(4 * n + 1);
    for (size_t i = 0; out && i < n; i++) {
        unsigned char ch = (unsigned char)t[i];
        if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f) o += (size_t)sprintf(out + o, "\\x%02x", ch);
        else out[o++] = (char)ch;
    }
    if (out) out[o] = 0;
    return out;
}

static dt_status_t console_emit(struct dt_sink *s, const struct dt_event *e)
{
    struct console *c = s->ctx;
    if (e->type == DT_EV_METRICS) {
        const struct dt_metrics *m = e->metrics;
        int eta = isfinite(m->eta_s) ? (int)m->eta_s : 0;
        char line[256];
        snprintf(line, sizeof line, "step %lld/%lld | loss %.4f | lr %.3e | %.1fk tok/s | ETA %d:%02d:%02d",
                 (long long)m->step, (long long)m->steps, m->loss, m->lr, m->tokens_per_s / 1000, eta / 3600,
                 eta / 60 % 60, eta % 60);
        bool last = m->step == m->steps;
        if (c->tty) {
            fprintf(stderr, "\r%s%s\033[K%s", dt_log_prefix(), line, last ? "\n" : "");
            c->open_line = !last;
        } else fprintf(stderr, "%s%s\n", dt_log_prefix(), line);
        return DT_SUCCESS;
    }
    if (e->type == DT_EV_EVAL) {
        end_line(c);
        DT_INFO(DT_SUB_TRAIN, "step %lld: validation loss %.4f", (long long)e->step, e->value);
    } else if (e->type == DT_EV_SAMPLE) {
        end_line(c);
        char *t = printable(e->text);
        DT_INFO(DT_SUB_TRAIN, "step %lld: sample: %s", (long long)e->step, t ? t : e->text);
        free(t);
    } else if (e->type == DT_EV_RUN_FAILED || e->type == DT_EV_RUN_FINISHED) {
        end_line(c);
    }
    return DT_SUCCESS;
}

static void console_close(struct dt_sink *s, double deadline)
{
    (void)deadline;
    end_line(s->ctx);
    free(s->ctx);
}

dt_status_t dt_sink_console(const struct dt_config *cfg, struct dt_sink **out)
{
    (void)cfg;
    struct console *c = calloc(1, sizeof *c);
    if (!c) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the console sink");
    c->tty = isatty(STDERR_FILENO);
    c->sink = (struct dt_sink){.name = "console", .emit = console_emit, .close = console_close, .ctx = c};
    *out = &c->sink;
    return DT_SUCCESS;
}
