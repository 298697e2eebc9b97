/*
 * prometheus.c - the events.prometheus sink: the latest metrics in Prometheus' text exposition
 * format (version 0.0.4) for node_exporter's textfile collector, which reads every *.prom file in
 * its --collector.textfile.directory at each scrape (issue #31).
 *
 * Rank 0 rewrites the file at every metrics record (events.interval) and once more when the run
 * ends, with dtrun_running 0. Each version goes to a temporary file beside it, then is renamed over
 * it, so a scrape reads the old file or the new one, never a part of one. The file is a view of the
 * run, not its record (events.jsonl is): a write that fails is said once, until one succeeds
 * again, and the run goes on.
 *
 * The collector refuses samples with timestamps, and one metric's HELP differing between files:
 * there are no timestamps, and every HELP text is a constant.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dt_build_config.h"
#include "config/schema.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/numfmt.h"
#include "events/events.h"
#include "events/jsonl.h"

#define SUFFIX ".prom"

struct prom {
    struct dt_sink sink;
    char path[4096], tmp[4200];
    /* run_id="...",run_name="...",job_id="...",rank="0": under 700 bytes, each byte of the run name
     * and ids escaped to 3 at most (U+FFFD for one that is not UTF-8) */
    char labels[1024];
    char info[1280]; /* labels and run_info's own ones */
    struct dt_metrics m; /* the last metrics record, without its op table (the record's memory) */
    bool have_metrics;
    int64_t step;                /* -1 until a record says */
    double val_loss;             /* NaN until an eval */
    double ckpt_time;            /* seconds since the epoch, when this process last saved one */
    int64_t ckpt_step;           /* -1: none saved yet */
    bool ended;                  /* the final file (dtrun_running 0) is written */
    bool failing;                /* the last write failed, and that was said */
};

/* The length of the UTF-8 sequence of 2 to 4 bytes at s, 0 if there is none: json_valid.c's
 * check, asked about a JSON string of that one character. */
static int utf8_len(const char *s)
{
    char q[6] = "\"";
    for (int n = 2; n <= 4 && s[n - 1]; n++) {
        memcpy(q + 1, s, (size_t)n);
        q[n + 1] = '"';
        if (dt_json_valid(q, (size_t)n + 2)) return n;
    }
    return 0;
}

/* k bytes of s after buf's string; a piece that does not fit is left out whole, so what is there
 * stays well-formed (the buffers are sized so that nothing is) */
static void append(char *buf, size_t n, const char *s, size_t k)
{
    size_t len = strlen(buf);
    if (len + k >= n) return;
    memcpy(buf + len, s, k);
    buf[len + k] = '\0';
}

/* name="value" appended to buf (after a comma when buf has labels already). Label values are UTF-8
 * with backslash, double quote and newline escaped; a byte that is not UTF-8 becomes U+FFFD. */
static void label(char *buf, size_t n, const char *name, const char *value)
{
    if (buf[0]) append(buf, n, ",", 1);
    append(buf, n, name, strlen(name));
    append(buf, n, "=\"", 2);
    for (const char *s = value; *s;) {
        unsigned char c = (unsigned char)*s;
        int k = c < 0x80 ? 1 : utf8_len(s);
        if (c == '\\') append(buf, n, "\\\\", 2);
        else if (c == '"') append(buf, n, "\\\"", 2);
        else if (c == '\n') append(buf, n, "\\n", 2);
        else if (k == 0) append(buf, n, "\xef\xbf\xbd", 3);
        else append(buf, n, s, (size_t)k);
        s += k ? k : 1;
    }
    append(buf, n, "\"", 1);
}

/* v as the format's float: the shortest of 15 to 17 digits that reads back as v (0.0003, not
 * 0.00029999999999999997), +Inf and -Inf spelled as Prometheus does */
static const char *number(double v, char *buf, size_t n)
{
    if (isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return dt_fmt_double(v, buf, n);
}

/* One metric family of one sample; none when v is NaN (a value the run does not know, null in the
 * records). */
static void family(FILE *f, const char *labels, const char *name, const char *type, const char *help, double v)
{
    char num[40];
    if (isnan(v)) return;
    fprintf(f, "# HELP dtrun_%s %s\n# TYPE dtrun_%s %s\ndtrun_%s{%s} %s\n", name, help, name, type, name, labels,
            number(v, num, sizeof num));
}

static void put_metrics(FILE *f, const struct prom *p)
{
    const char *l = p->labels;
    const struct dt_metrics *m = &p->m;
    bool k = p->have_metrics, dev = k && m->device_memory;
    family(f, l, "up", "gauge", "1: this file is a dtrun run's (see dtrun_running)", 1);
    family(f, l, "running", "gauge", "1 while the run trains, 0 once it has ended (finished, failed or stopped)",
           p->ended ? 0 : 1);
    family(f, p->info, "run_info", "gauge", "The run's dtrun version, strategy, precision and world size; always 1", 1);
    family(f, l, "step", "gauge", "Optimizer steps done", p->step >= 0 ? (double)p->step : NAN);
    family(f, l, "tokens_total", "counter", "Tokens trained on (samples for an MLP)", k ? (double)m->tokens : NAN);
    family(f, l, "loss", "gauge", "Training loss of the last step, the mean over ranks", k ? m->loss : NAN);
    family(f, l, "val_loss", "gauge", "Validation loss of the last evaluation", p->val_loss);
    family(f, l, "learning_rate", "gauge", "Learning rate of the last step", k ? m->lr : NAN);
    family(f, l, "tokens_per_second", "gauge", "Training throughput over the last events.interval",
           k ? m->tokens_per_s : NAN);
    family(f, l, "mfu", "gauge", "Model FLOPs utilization over the last events.interval (0 to 1)", k ? m->mfu : NAN);
    family(f, l, "grad_norm", "gauge", "Gradient norm of the last step, before clipping", k ? m->grad_norm : NAN);
    family(f, l, "loss_scale", "gauge", "Loss scale of the last step (1 where the precision does not scale)",
           k ? m->loss_scale : NAN);
    family(f, l, "skipped_steps_total", "counter", "Steps skipped for a gradient overflow",
           k ? (double)m->skipped_steps : NAN);
    family(f, l, "peak_rss_bytes", "gauge", "Peak resident set size, the largest over the ranks' processes",
           k ? (double)m->peak_memory_bytes : NAN);
    family(f, l, "device_peak_allocated_bytes", "gauge", "Peak GPU memory allocated on rank 0's device",
           dev ? (double)m->device_peak_allocated_bytes : NAN);
    family(f, l, "device_reserved_bytes", "gauge", "GPU memory reserved on rank 0's device",
           dev ? (double)m->device_reserved_bytes : NAN);
    family(f, l, "last_checkpoint_timestamp_seconds", "gauge",
           "When this process last saved a checkpoint, in seconds since the epoch", p->ckpt_time);
    family(f, l, "last_checkpoint_step", "gauge", "Step of the last checkpoint this process saved",
           p->ckpt_step >= 0 ? (double)p->ckpt_step : NAN);
}

/* The file's next version: written beside it, then renamed over it. */
static void write_file(struct prom *p)
{
    const char *failed = NULL;
    int err = 0;
    FILE *f = fopen(p->tmp, "w"); /* not mkstemp: its mode 0600 would keep node_exporter's user out */
    if (!f) {
        failed = "cannot create the temporary file";
        err = errno;
    } else {
        errno = 0;
        put_metrics(f, p);
        bool bad = fflush(f) != 0 || ferror(f);
        err = errno;
        if (fclose(f) != 0 && !bad) {
            bad = true;
            err = errno;
        }
        if (bad) failed = "cannot write the temporary file";
        else if (rename(p->tmp, p->path) != 0) {
            failed = "cannot rename the temporary file over it";
            err = errno;
        }
        if (failed) unlink(p->tmp);
    }
    if (failed && !p->failing)
        DT_WARN("%s: %s (%s): %s; the run goes on without Prometheus metrics (said once, until a write succeeds)\n"
                "  hint: make the directory writable, or set events.prometheus to a file in one that is", p->path,
                failed, p->tmp, strerror(err ? err : EIO));
    else if (!failed && p->failing)
        DT_INFO(DT_SUB_EVENTS, "%s: the Prometheus metrics are written again", p->path);
    p->failing = failed != NULL;
}

static dt_status_t prom_emit(struct dt_sink *s, const struct dt_event *e)
{
    struct prom *p = s->ctx;
    if (e->type == DT_EV_METRICS) {
        p->m = *e->metrics;
        p->m.nops = 0;
        p->m.op_names = NULL;
        p->m.op_ms = NULL;
        p->have_metrics = true;
        p->step = e->step;
        write_file(p);
    } else if (e->type == DT_EV_EVAL) {
        p->val_loss = e->value;
    } else if (e->type == DT_EV_CHECKPOINT_SAVED) {
        struct timespec now = dt_wall_now();
        p->ckpt_time = (double)now.tv_sec + (double)(now.tv_nsec / 1000000) / 1e3;
        p->ckpt_step = e->step;
    } else if (e->type == DT_EV_RUN_FINISHED || e->type == DT_EV_RUN_FAILED) {
        if (e->type == DT_EV_RUN_FINISHED) p->step = e->step; /* a run_failed's step is the one that failed */
        p->ended = true;
        write_file(p);
    }
    return DT_SUCCESS;
}

/* A process that ends without run_finished or run_failed (a stop signal, an error another rank
 * reported) still leaves a file that says it ended. */
static void prom_close(struct dt_sink *s, double deadline)
{
    (void)deadline;
    struct prom *p = s->ctx;
    if (!p->ended) {
        p->ended = true;
        write_file(p);
    }
    free(p);
}

dt_status_t dt_sink_prometheus(const struct dt_events *ev, const char *path, struct dt_sink **out)
{
    size_t n = strlen(path);
    if (n < strlen(SUFFIX) || strcmp(path + n - strlen(SUFFIX), SUFFIX) != 0)
        return dt_error(DT_ERR_CONFIG, "%s: error: events.prometheus must end in " SUFFIX ": node_exporter's "
                        "textfile collector reads only *" SUFFIX " files\n  hint: events.prometheus=metrics" SUFFIX,
                        path);
    struct prom *p = calloc(1, sizeof *p);
    if (!p) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the Prometheus metrics");
    snprintf(p->path, sizeof p->path, "%s", path);
    /* a name per process: two runs given the same file cannot interleave their writes; not *.prom,
     * so the collector never reads one */
    snprintf(p->tmp, sizeof p->tmp, "%s.%ld.tmp", path, (long)getpid());
    char rank[16], world[16];
    snprintf(rank, sizeof rank, "%d", ev->rank);
    label(p->labels, sizeof p->labels, "run_id", ev->run_id);
    label(p->labels, sizeof p->labels, "run_name", ev->run_name);
    label(p->labels, sizeof p->labels, "job_id", ev->job_id);
    label(p->labels, sizeof p->labels, "rank", rank);
    const struct dt_config *cfg = ev->cfg;
    snprintf(world, sizeof world, "%d", cfg->resolved.world);
    snprintf(p->info, sizeof p->info, "%s", p->labels);
    label(p->info, sizeof p->info, "version", PACKAGE_VERSION);
    label(p->info, sizeof p->info, "strategy", dt_enum_str(dt_strategy_names, cfg->resolved.strategy));
    label(p->info, sizeof p->info, "precision", dt_enum_str(dt_precision_names, cfg->compute.precision));
    label(p->info, sizeof p->info, "world_size", world);
    p->step = -1;
    p->val_loss = NAN;
    p->ckpt_time = NAN;
    p->ckpt_step = -1;
    /* made as events.jsonl's is; if it cannot be, the first write says so, and the run goes on */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (dt_mkdirs(dir) != DT_SUCCESS) dt_error_clear();
    }
    p->sink = (struct dt_sink){.name = "prometheus", .emit = prom_emit, .close = prom_close, .ctx = p};
    *out = &p->sink;
    return DT_SUCCESS;
}
