/*
 * test_prometheus.c - the events.prometheus sink (src/events/prometheus.c): the exact text it
 * writes for a metrics record, an eval and the run's end; label values escaped (a run name with a
 * quote, a backslash, a newline and a byte that is not UTF-8); values the run does not know left
 * out; the checkpoint's time; every version replacing the last by a rename, with no temporary file
 * left; a .prom suffix required; an unwritable directory said once, the run going on. Every file
 * it writes goes through a strict reader of the exposition format, written here and tested on
 * malformed text first.
 *
 *   make tests/unit/test_prometheus && DT_SRCDIR=. tests/unit/test_prometheus
 */
#include <dirent.h>
#include <fcntl.h>
#include <locale.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wchar.h>
#include "dt_build_config.h"
#include "core/clock.h"
#include "core/error.h"
#include "dt_test.h"
#include "events/events.h"

// ---------------------------------------------------------------- a strict reader of the format

/*
 * Text exposition format 0.0.4 (prometheus.io/docs/instrumenting/exposition_formats), as
 * node_exporter's textfile collector reads it, and stricter where dtrun writes one way only:
 * every line is `# HELP name text`, `# TYPE name counter|gauge|untyped` or a sample
 * `name{label="value",...} value`, single spaces between the parts, none before or after; each
 * family is its HELP, then its TYPE, then its samples, once in the file; no timestamps (the
 * collector refuses them); the file ends with a newline.
 */
struct reader {
    char families[64][128];
    int nfamilies;
    char series[256][1024];
    int nseries;
    const char *type; /* the current family's TYPE, NULL before it */
    bool sampled;     /* the current family has a sample */
    char why[256];
};

static bool bad(struct reader *r, int line, const char *what)
{
    snprintf(r->why, sizeof r->why, "line %d: %s", line, what);
    return false;
}

/* a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or, labels, a label name ([a-zA-Z_][a-zA-Z0-9_]*): its
 * length at s, 0 if none */
static size_t name_len(const char *s, bool metric)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
        if (!letter && !(n > 0 && c >= '0' && c <= '9')) break;
    }
    return n;
}

/* Whether s is UTF-8 up to U+10FFFF: glibc's decoder, which refuses overlong forms and surrogates,
 * then the range. */
static bool utf8_ok(const char *s, size_t n)
{
    if (!setlocale(LC_CTYPE, "C.UTF-8")) fail_msg("no C.UTF-8 locale to check UTF-8 with");
    mbstate_t st = {0};
    bool ok = true;
    while (ok && n > 0) {
        wchar_t wc;
        size_t k = mbrtowc(&wc, s, n, &st);
        ok = k != (size_t)-1 && k != (size_t)-2 && k != 0 && (unsigned long)wc <= 0x10ffff;
        if (ok) {
            s += k;
            n -= k;
        }
    }
    setlocale(LC_CTYPE, "C");
    return ok;
}

/* A float as dtrun writes one: [-]digits[.digits][e[+-]digits], NaN, +Inf or -Inf. */
static bool float_ok(const char *s, double *v)
{
    *v = strtod(s, NULL);
    if (!strcmp(s, "NaN") || !strcmp(s, "+Inf") || !strcmp(s, "-Inf")) return true;
    const char *p = s + (*s == '-');
    size_t d = strspn(p, "0123456789");
    if (d == 0) return false;
    p += d;
    if (*p == '.') {
        if ((d = strspn(++p, "0123456789")) == 0) return false;
        p += d;
    }
    if (*p == 'e' || *p == 'E') {
        p += 1 + (p[1] == '+' || p[1] == '-');
        if ((d = strspn(p, "0123456789")) == 0) return false;
        p += d;
    }
    return *p == '\0';
}

/* {label="value",...} at *s, moved past it; value escapes are \\, \" and \n only */
static bool labels_ok(struct reader *r, int line, const char **s)
{
    const char *p = *s + 1;
    char names[16][128];
    int nnames = 0;
    if (*p == '}') return bad(r, line, "an empty label set");
    for (;;) {
        size_t n = name_len(p, false);
        if (n == 0 || n >= sizeof names[0]) return bad(r, line, "not a label name");
        if (p[0] == '_' && p[1] == '_') return bad(r, line, "a label name starting with __ (reserved)");
        for (int i = 0; i < nnames; i++)
            if (strlen(names[i]) == n && !strncmp(names[i], p, n)) return bad(r, line, "a label given twice");
        if (nnames == 16) return bad(r, line, "more than 16 labels");
        snprintf(names[nnames++], sizeof names[0], "%.*s", (int)n, p);
        p += n;
        if (p[0] != '=' || p[1] != '"') return bad(r, line, "a label without =\"value\"");
        const char *v = p += 2;
        for (; *p != '"'; p++) {
            if (!*p) return bad(r, line, "an unterminated label value");
            if (*p == '\\' && !(p[1] == '\\' || p[1] == '"' || p[1] == 'n')) return bad(r, line, "a bad escape");
            if (*p == '\\') p++;
        }
        if (!utf8_ok(v, (size_t)(p - v))) return bad(r, line, "a label value that is not UTF-8");
        p++;
        if (*p == '}') break;
        if (*p != ',' || p[1] == '}') return bad(r, line, "labels not separated by one comma");
        p++;
    }
    *s = p + 1;
    return true;
}

static bool sample_ok(struct reader *r, int line, const char *s)
{
    const char *start = s;
    size_t n = name_len(s, true);
    if (n == 0) return bad(r, line, "not a metric name");
    if (!r->type) return bad(r, line, "a sample before its family's HELP and TYPE");
    const char *family = r->families[r->nfamilies - 1];
    if (strlen(family) != n || strncmp(family, s, n)) return bad(r, line, "a sample of another family");
    s += n;
    if (*s == '{' && !labels_ok(r, line, &s)) return false;
    if (s[0] != ' ' || s[1] == ' ') return bad(r, line, "not one space before the value");
    size_t key = (size_t)(s - start); /* the series: name and labels */
    if (strchr(++s, ' ')) return bad(r, line, "a timestamp, or text after the value");
    double v;
    if (!float_ok(s, &v)) return bad(r, line, "not a float value");
    if (!strcmp(r->type, "counter") && !(v >= 0 && v < INFINITY))
        return bad(r, line, "a counter below 0 or not finite");
    if (r->nseries == 256) return bad(r, line, "more than 256 series");
    snprintf(r->series[r->nseries], sizeof r->series[0], "%.*s", (int)key, start);
    for (int i = 0; i < r->nseries; i++)
        if (!strcmp(r->series[i], r->series[r->nseries])) return bad(r, line, "a series given twice");
    r->nseries++;
    r->sampled = true;
    return true;
}

/* # HELP name text, # TYPE name type */
static bool comment_ok(struct reader *r, int line, const char *s)
{
    bool help = !strncmp(s, "# HELP ", 7);
    if (!help && strncmp(s, "# TYPE ", 7)) return bad(r, line, "a comment that is neither HELP nor TYPE");
    s += 7;
    size_t n = name_len(s, true);
    if (n == 0 || n >= sizeof r->families[0] || s[n] != ' ' || !s[n + 1])
        return bad(r, line, "not a metric name, a space and text");
    if (help) {
        if (r->nfamilies > 0 && !r->sampled) return bad(r, line, "a family without samples");
        for (int i = 0; i < r->nfamilies; i++)
            if (strlen(r->families[i]) == n && !strncmp(r->families[i], s, n))
                return bad(r, line, "a family given twice");
        if (r->nfamilies == 64) return bad(r, line, "more than 64 families");
        snprintf(r->families[r->nfamilies++], sizeof r->families[0], "%.*s", (int)n, s);
        r->type = NULL;
        r->sampled = false;
        for (const char *p = s + n + 1; *p; p++) {
            if (*p == '\\' && p[1] != '\\' && p[1] != 'n') return bad(r, line, "a bad escape in HELP");
            if (*p == '\\') p++;
        }
        return utf8_ok(s, strlen(s)) || bad(r, line, "HELP text that is not UTF-8");
    }
    const char *family = r->nfamilies ? r->families[r->nfamilies - 1] : "";
    if (strlen(family) != n || strncmp(family, s, n)) return bad(r, line, "a TYPE not after its family's HELP");
    if (r->type) return bad(r, line, "a second TYPE");
    s += n + 1;
    if (strcmp(s, "counter") && strcmp(s, "gauge") && strcmp(s, "untyped"))
        return bad(r, line, "a type other than counter, gauge or untyped");
    r->type = !strcmp(s, "counter") ? "counter" : "gauge";
    return true;
}

/* Whether text is a well-formed file; r->why says where it is not. */
static bool exposition_ok(struct reader *r, const char *text)
{
    *r = (struct reader){0};
    size_t len = strlen(text);
    if (len == 0 || text[len - 1] != '\n') return bad(r, 0, "empty, or no newline at the end");
    int line = 0;
    for (const char *s = text; *s;) {
        const char *end = strchr(s, '\n');
        char buf[2048];
        line++;
        if ((size_t)(end - s) >= sizeof buf) return bad(r, line, "a line too long");
        snprintf(buf, sizeof buf, "%.*s", (int)(end - s), s);
        s = end + 1;
        if (!buf[0] || buf[0] == ' ' || buf[strlen(buf) - 1] == ' ' || strchr(buf, '\r') || strchr(buf, '\t'))
            return bad(r, line, "a blank line, a blank at either end, a CR or a tab");
        if (!(buf[0] == '#' ? comment_ok(r, line, buf) : sample_ok(r, line, buf))) return false;
    }
    return r->sampled || bad(r, line, "a family without samples");
}

static void reader_rejects(void **state)
{
    (void)state;
    static const char *const good =
        "# HELP a_b:c Help with \\\\ and \\n.\n# TYPE a_b:c gauge\na_b:c{x=\"q\\\"\\\\\\n\xc3\xa9\",y=\"\"} -1.5e-07\n"
        "a_b:c{x=\"2\"} NaN\n# HELP n_total N.\n# TYPE n_total counter\nn_total 3\n";
    static const struct {
        const char *text, *why;
    } bad_texts[] = {
        {"", "empty"},
        {"# HELP a A.\n# TYPE a gauge\na 1", "no newline at the end"},
        {"# HELP 1a A.\n# TYPE 1a gauge\n1a 1\n", "not a metric name"},
        {"# HELP a-b A.\n# TYPE a-b gauge\na-b 1\n", "not a metric name"},
        {"# HELP a A.\n# TYPE a gauge\na 1 1700000000000\n", "a timestamp"},
        {"# HELP a A.\n# TYPE a gauge\na{x=\"\\t\"} 1\n", "a bad escape"},
        {"# HELP a A.\n# TYPE a gauge\na{x=y} 1\n", "without =\"value\""},
        {"# HELP a A.\n# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n", "a label given twice"},
        {"# HELP a A.\n# TYPE a gauge\na{__x=\"1\"} 1\n", "reserved"},
        {"# HELP a A.\n# TYPE a gauge\na{x=\"1\",} 1\n", "one comma"},
        {"# HELP a A.\n# TYPE a gauge\na{x=\"1} 1\n", "unterminated"},
        {"# HELP a A.\n# TYPE a gauge\na{x=\"\xc3\"} 1\n", "not UTF-8"},
        {"# HELP a A.\n# TYPE a gauge\na{x=\"\xf4\x90\x80\x80\"} 1\n", "not UTF-8"},
        {"# HELP a A.\n# TYPE a gauge\na one\n", "not a float"},
        {"# HELP a A.\n# TYPE a gauge\na 1.\n", "not a float"},
        {"# HELP a A.\n# TYPE a gauge\na nan\n", "not a float"},
        {"# HELP a A.\n# TYPE a gauge\na  1\n", "not one space"},
        {"# HELP a A.\n# TYPE a counter\na -1\n", "a counter below 0"},
        {"# HELP a A.\n# TYPE a gauge\na 1\na 2\n", "a series given twice"},
        {"# HELP a A.\n# TYPE a gauge\n# TYPE a gauge\na 1\n", "a second TYPE"},
        {"# HELP a A.\n# TYPE a gauges\na 1\n", "a type other than"},
        {"# HELP a A.\n# TYPE a histogram\na 1\n", "a type other than"},
        {"# TYPE a gauge\na 1\n", "not after its family's HELP"},
        {"a 1\n", "a sample before"},
        {"# HELP a A.\n# TYPE a gauge\nb 1\n", "another family"},
        {"# HELP a A.\n# HELP b B.\n# TYPE b gauge\nb 1\n", "a family without samples"},
        {"# HELP a A.\n# TYPE a gauge\na 1\n# HELP b B.\n# TYPE b gauge\nb 1\n# HELP a A.\n", "given twice"},
        {"# HELP a A.\n# TYPE a gauge\n", "a family without samples"},
        {"# HELP a A \\x.\n# TYPE a gauge\na 1\n", "a bad escape in HELP"},
        {"# HELP a\n# TYPE a gauge\na 1\n", "a space and text"},
        {"# a comment\n", "neither HELP nor TYPE"},
        {"# HELP a A.\n# TYPE a gauge\n\na 1\n", "a blank line"},
        {"# HELP a A.\n# TYPE a gauge\na 1 \n", "a blank at either end"},
        {"# HELP a A.\n# TYPE a gauge\na 1\r\n", "a CR"},
    };
    struct reader r;
    if (!exposition_ok(&r, good)) fail_msg("rejected the good text: %s", r.why);
    for (size_t i = 0; i < sizeof bad_texts / sizeof bad_texts[0]; i++) {
        if (exposition_ok(&r, bad_texts[i].text)) fail_msg("accepted bad text %zu:\n%s", i, bad_texts[i].text);
        if (!strstr(r.why, bad_texts[i].why))
            fail_msg("bad text %zu rejected for '%s', not '%s'", i, r.why, bad_texts[i].why);
    }
}

// ---------------------------------------------------------------- the sink

static struct dt_config cfg;

/* The sink at path, for a run of this name, as dt_events_open opens it on rank 0. */
static struct dt_sink *open_sink(const char *path, const char *run_name)
{
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, NULL), DT_SUCCESS);
    struct dt_events ev = {.rank = 0, .cfg = &cfg};
    snprintf(ev.run_id, sizeof ev.run_id, "0123456789abcdef");
    snprintf(ev.run_name, sizeof ev.run_name, "%s", run_name);
    snprintf(ev.job_id, sizeof ev.job_id, "4242");
    struct dt_sink *s = NULL;
    if (dt_sink_prometheus(&ev, path, &s) != DT_SUCCESS) fail_msg("%s", dt_error_msg());
    return s;
}

static void emit(struct dt_sink *s, struct dt_event e) { assert_int_equal(s->emit(s, &e), DT_SUCCESS); }

/* The file's text, checked by the reader. */
static char *read_checked(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: not written", path);
    char *text = calloc(1, 1 << 16);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    fclose(f);
    text[n] = '\0';
    struct reader r;
    if (!exposition_ok(&r, text)) fail_msg("%s: %s in:\n%s", path, r.why, text);
    return text;
}

/* dir's entries but . and .., one a line, sorted ("" when it cannot be read) */
static void listing(const char *dir, char *out, size_t n)
{
    struct dirent **names;
    int k = scandir(dir, &names, NULL, alphasort);
    out[0] = '\0';
    for (int i = 0; i < k; i++) {
        if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, ".."))
            snprintf(out + strlen(out), n - strlen(out), "%s\n", names[i]->d_name);
        free(names[i]);
    }
    if (k >= 0) free(names);
}

/* one sample of a sink open_sink opened, as a line of its file */
#define SAMPLE(name, run_name, value) \
    "\ndtrun_" name "{run_id=\"0123456789abcdef\",run_name=\"" run_name "\",job_id=\"4242\",rank=\"0\"} " value "\n"
#define LABELS "{run_id=\"0123456789abcdef\",run_name=\"a \\\"b\\\" \\\\ c\\nd\",job_id=\"4242\",rank=\"0\"}"
#define FAMILY(name, type, help, value) \
    "# HELP dtrun_" name " " help "\n# TYPE dtrun_" name " " type "\ndtrun_" name LABELS " " value "\n"
#define HEAD(running)                                                                                              \
    FAMILY("up", "gauge", "1: this file is a dtrun run's (see dtrun_running)", "1")                                \
    FAMILY("running", "gauge", "1 while the run trains, 0 once it has ended (finished, failed or stopped)", running) \
    "# HELP dtrun_run_info The run's dtrun version, strategy, precision and world size; always 1\n"              \
    "# TYPE dtrun_run_info gauge\n"                                                                                \
    "dtrun_run_info{run_id=\"0123456789abcdef\",run_name=\"a \\\"b\\\" \\\\ c\\nd\",job_id=\"4242\",rank=\"0\","   \
    "version=\"" PACKAGE_VERSION "\",strategy=\"single\",precision=\"32-true\",world_size=\"1\"} 1\n"
#define METRICS(step, tokens, val_loss)                                                                            \
    FAMILY("step", "gauge", "Optimizer steps done", step)                                                          \
    FAMILY("tokens_total", "counter", "Tokens trained on (samples for an MLP)", tokens)                            \
    FAMILY("loss", "gauge", "Training loss of the last step, the mean over ranks", "4.25") val_loss                \
    FAMILY("learning_rate", "gauge", "Learning rate of the last step", "0.0003")                                   \
    FAMILY("tokens_per_second", "gauge", "Training throughput over the last events.interval", "95000.5")           \
    FAMILY("mfu", "gauge", "Model FLOPs utilization over the last events.interval (0 to 1)", "0.41")              \
    FAMILY("grad_norm", "gauge", "Gradient norm of the last step, before clipping", "1.5")                         \
    FAMILY("loss_scale", "gauge", "Loss scale of the last step (1 where the precision does not scale)", "65536")  \
    FAMILY("skipped_steps_total", "counter", "Steps skipped for a gradient overflow", "2")                         \
    FAMILY("peak_rss_bytes", "gauge", "Peak resident set size, the largest over the ranks' processes", "185171968") \
    FAMILY("device_peak_allocated_bytes", "gauge", "Peak GPU memory allocated on rank 0's device", "1073741824")  \
    FAMILY("device_reserved_bytes", "gauge", "GPU memory reserved on rank 0's device", "2147483648")

static const struct dt_metrics metrics = {
    .step = 10, .steps = 300, .tokens = 10240, .loss = 4.25, .lr = 3e-4, .grad_norm = 1.5, .loss_scale = 65536,
    .skipped_steps = 2, .tokens_per_s = 95000.5, .mfu = 0.41, .peak_memory_bytes = 185171968, .device_memory = true,
    .device_peak_allocated_bytes = 1 << 30, .device_reserved_bytes = 2147483648};

/* A metrics record, an eval and the end, each file exactly; the run name needs every escape. */
static void exact_text(void **state)
{
    (void)state;
    struct dt_sink *s = open_sink("out/metrics.prom", "a \"b\" \\ c\nd");
    struct dt_metrics m = metrics;
    emit(s, (struct dt_event){.type = DT_EV_RUN_STARTED});
    assert_int_equal(access("out/metrics.prom", F_OK), -1); /* the first version comes with the first metrics */
    emit(s, (struct dt_event){.type = DT_EV_METRICS, .metrics = &m, .step = m.step});
    char *text = read_checked("out/metrics.prom");
    assert_string_equal(text, HEAD("1") METRICS("10", "10240", ""));
    free(text);
    /* the eval waits for the next file; the end writes one with the steps run_finished says */
    emit(s, (struct dt_event){.type = DT_EV_EVAL, .step = 10, .value = 4.125});
    emit(s, (struct dt_event){.type = DT_EV_RUN_FINISHED, .step = 12});
    text = read_checked("out/metrics.prom");
    assert_string_equal(text, HEAD("0") METRICS("12", "10240",
                                                FAMILY("val_loss", "gauge", "Validation loss of the last evaluation",
                                                       "4.125")));
    free(text);
    s->close(s, 0);
    char dir[256];
    listing("out", dir, sizeof dir);
    assert_string_equal(dir, "metrics.prom\n");
    dt_config_free(&cfg);
}

/* Values the run does not know (NaN, null in the records) leave their family out, as does device
 * memory on a CPU; the step and tokens are exact integers; a process that ends without
 * run_finished (a stop signal) says it ended at close. Another byte that is not UTF-8 in the name
 * becomes U+FFFD. */
static void unknown_values(void **state)
{
    (void)state;
    struct dt_sink *s = open_sink("m.prom", "x\xff");
    struct dt_metrics m = {.step = 7, .tokens = (int64_t)1 << 53, .loss = 2, .lr = 1e-5, .grad_norm = NAN,
                           .loss_scale = 1, .tokens_per_s = 10, .mfu = NAN, .peak_memory_bytes = 1};
    emit(s, (struct dt_event){.type = DT_EV_METRICS, .metrics = &m, .step = m.step});
    s->close(s, 0);
    char *text = read_checked("m.prom");
    assert_non_null(strstr(text, "run_name=\"x\xef\xbf\xbd\""));
    assert_non_null(strstr(text, SAMPLE("running", "x\xef\xbf\xbd", "0")));
    assert_non_null(strstr(text, "} 9007199254740992\n"));
    assert_non_null(strstr(text, "\ndtrun_learning_rate{"));
    assert_non_null(strstr(text, "} 1e-05\n"));
    static const char *const gone[] = {"mfu", "grad_norm", "val_loss", "device_peak_allocated_bytes",
                                       "device_reserved_bytes", "last_checkpoint_timestamp_seconds",
                                       "last_checkpoint_step"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "dtrun_%s ", gone[i]);
        if (strstr(text, name)) fail_msg("%s is written:\n%s", gone[i], text);
    }
    free(text);
    dt_config_free(&cfg);
}

/* A checkpoint_saved gives the wall time it came and its step, in the next file; a run_failed
 * keeps the last step done. */
static void checkpoint_time(void **state)
{
    (void)state;
    struct dt_sink *s = open_sink("m.prom", "c");
    struct dt_metrics m = metrics;
    double before = (double)dt_wall_now().tv_sec;
    emit(s, (struct dt_event){.type = DT_EV_CHECKPOINT_SAVED, .step = 10});
    double after = (double)dt_wall_now().tv_sec + 1;
    emit(s, (struct dt_event){.type = DT_EV_METRICS, .metrics = &m, .step = m.step});
    emit(s, (struct dt_event){.type = DT_EV_RUN_FAILED, .step = 11});
    s->close(s, 0);
    char *text = read_checked("m.prom");
    const char *at = strstr(text, "\ndtrun_last_checkpoint_timestamp_seconds{");
    assert_non_null(at);
    double t = strtod(strstr(at, "} ") + 2, NULL);
    if (!(t >= before && t <= after)) fail_msg("checkpoint time %f, not within [%f, %f]", t, before, after);
    assert_non_null(strstr(text, SAMPLE("last_checkpoint_step", "c", "10")));
    assert_non_null(strstr(text, SAMPLE("step", "c", "10")));
    assert_non_null(strstr(text, SAMPLE("running", "c", "0")));
    free(text);
    dt_config_free(&cfg);
}

/* Each version is a new file renamed over the last: a reader that opened the old one still reads
 * it whole, and no temporary file stays. */
static void atomic_replace(void **state)
{
    (void)state;
    struct dt_sink *s = open_sink("m.prom", "r");
    struct dt_metrics m = metrics;
    emit(s, (struct dt_event){.type = DT_EV_METRICS, .metrics = &m, .step = m.step});
    char *first = read_checked("m.prom");
    int fd = open("m.prom", O_RDONLY);
    assert_true(fd >= 0);
    struct stat a, b;
    assert_int_equal(fstat(fd, &a), 0);
    for (int i = 0; i < 20; i++) {
        m.step++;
        emit(s, (struct dt_event){.type = DT_EV_METRICS, .metrics = &m, .step = m.step});
    }
    assert_int_equal(stat("m.prom", &b), 0);
    assert_true(a.st_ino != b.st_ino);
    char *old = calloc(1, 1 << 16);
    assert_non_null(old);
    assert_int_equal(read(fd, old, (1 << 16) - 1), (ssize_t)strlen(first));
    close(fd);
    assert_string_equal(old, first);
    char *last = read_checked("m.prom");
    assert_non_null(strstr(last, SAMPLE("step", "r", "30")));
    s->close(s, 0);
    char dir[256];
    listing(".", dir, sizeof dir);
    assert_string_equal(dir, "m.prom\n");
    free(first);
    free(old);
    free(last);
    dt_config_free(&cfg);
}

/* Only a .prom file: the collector reads nothing else. */
static void suffix(void **state)
{
    (void)state;
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, NULL), DT_SUCCESS);
    struct dt_events ev = {.cfg = &cfg};
    struct dt_sink *s = NULL;
    static const char *const refused[] = {"runs/x/metrics.txt", "metrics.prom.tmp", "prom", ".pro"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_int_equal(dt_sink_prometheus(&ev, refused[i], &s), DT_ERR_CONFIG);
        char want[128];
        snprintf(want, sizeof want, "%s: error: events.prometheus must end in .prom: ", refused[i]);
        const char *msg = dt_error_msg();
        if (strncmp(msg, want, strlen(want)) || !strstr(msg, "\n  hint: events.prometheus=metrics.prom"))
            fail_msg("%s", msg);
    }
    assert_null(s);
    dt_config_free(&cfg);
}

/* A directory that cannot be written (here a file stands where it should be): one warning, which
 * says what failed, where and what to do; emit still succeeds; once the directory is there the
 * file is written, and that is said. */
static void unwritable(void **state)
{
    (void)state;
    dt_test_write("d", "a file, not a directory\n");
    dt_test_stderr_begin();
    struct dt_sink *s = open_sink("d/m.prom", "u");
    struct dt_metrics m = metrics;
    for (int i = 0; i < 3; i++) emit(s, (struct dt_event){.type = DT_EV_METRICS, .metrics = &m, .step = m.step});
    char *err = dt_test_stderr_end();
    char want[128];
    snprintf(want, sizeof want, "d/m.prom: cannot create the temporary file (d/m.prom.%ld.tmp): Not a directory; ",
             (long)getpid());
    const char *at = strstr(err, want);
    if (!at) fail_msg("no warning '%s' in:\n%s", want, err);
    assert_null(strstr(at + strlen(want), "cannot create"));
    assert_non_null(strstr(err, "\n  hint: make the directory writable, or set events.prometheus to a file in one"));
    free(err);
    assert_int_equal(unlink("d"), 0);
    assert_int_equal(mkdir("d", 0777), 0);
    dt_test_stderr_begin();
    emit(s, (struct dt_event){.type = DT_EV_METRICS, .metrics = &m, .step = m.step});
    err = dt_test_stderr_end();
    assert_non_null(strstr(err, "d/m.prom: the Prometheus metrics are written again"));
    free(err);
    free(read_checked("d/m.prom"));
    s->close(s, 0);
    dt_config_free(&cfg);
}

DT_TESTS(T(reader_rejects), T(exact_text), T(unknown_values), T(checkpoint_time), T(atomic_replace), T(suffix),
         T(unwritable))
