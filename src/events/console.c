/* console.c - the console sink: the progress line of metrics records (rewritten in place on a
 * terminal, one line per record otherwise) and one line for the other records worth a look. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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
