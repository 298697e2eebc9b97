/*
 * test_report.c - the pieces of `dtrun report` (src/report/): tick values and their labels on
 * linear and log axes; thinning (the least and greatest point of every pixel column kept, in order,
 * so a spike survives; 100k points down to at most two a column; empty and one-point series); XML
 * escaping of run names and config values with < & " ' and bytes that are not UTF-8; a run read
 * from events.jsonl with a torn last line, a record torn by a kill and the next life's appended to
 * it, a resume (one curve), duplicates; and the exact errors for a run.dir without events.
 *
 *   make tests/unit/test_report && DT_SRCDIR=. tests/unit/test_report
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/error.h"
#include "dt_test.h"
#include "report/report.h"
#include "report/run.h"
#include "report/scale.h"
#include "report/svg.h"
#include "report/thin.h"

// ---------------------------------------------------------------- scales and ticks

/* the ticks of data lo..hi on an axis of kind, as their labels joined by spaces */
static void ticks_of(enum dt_scale_kind kind, double lo, double hi, char *out, size_t n)
{
    struct dt_scale s;
    assert_true(dt_scale_fit(&s, kind, lo, hi, 0, 500));
    double t[16], step;
    int k = dt_scale_ticks(&s, t, 16, &step);
    out[0] = '\0';
    for (int i = 0; i < k; i++) {
        char label[32];
        dt_scale_label(t[i], step, label, sizeof label);
        snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? " " : "", label);
    }
}

static void ticks(void **state)
{
    (void)state;
    static const struct {
        enum dt_scale_kind kind;
        double lo, hi;
        const char *want;
    } cases[] = {
        {DT_SCALE_LINEAR, 2, 30, "0 10 20 30"},
        {DT_SCALE_LINEAR, 2, 24, "0 5 10 15 20 25"},
        {DT_SCALE_LINEAR, 0, 0.003, "0 0.001 0.002 0.003"},
        {DT_SCALE_LINEAR, 0, 1.7e6, "0 500k 1.0M 1.5M 2.0M"},
        {DT_SCALE_LINEAR, 0, 3e-5, "0 1e-5 2e-5 3e-5"},
        {DT_SCALE_LINEAR, -1, 1, "-1.0 -0.5 0 0.5 1.0"},
        /* one value: a range around it */
        {DT_SCALE_LINEAR, 7, 7, "6.0 6.5 7.0 7.5 8.0"},
        {DT_SCALE_LINEAR, 0, 0, "-1.0 -0.5 0 0.5 1.0"},
        /* log, two decades or more: every decade */
        {DT_SCALE_LOG, 0.012, 5.5, "0.01 0.1 1 10"},
        /* many decades: every k-th, at most the room */
        {DT_SCALE_LOG, 1e-20, 1e20, "1e-20 1e-17 1e-14 1e-11 1e-8 1e-5 0.01 10 10k 10M 10G 10T 1e+16 1e+19"},
        /* about a decade: 1, 2, 5 */
        {DT_SCALE_LOG, 1.24, 5.5, "1 2 5 10"},
        /* narrow: round linear steps, still on a log axis */
        {DT_SCALE_LOG, 2.1, 3.4, "2.0 2.5 3.0 3.5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char t[256];
        ticks_of(cases[i].kind, cases[i].lo, cases[i].hi, t, sizeof t);
        if (strcmp(t, cases[i].want))
            fail_msg("%s %g..%g: ticks \"%s\", expected \"%s\"", cases[i].kind == DT_SCALE_LOG ? "log" : "linear",
                     cases[i].lo, cases[i].hi, t, cases[i].want);
    }
}

static void domains(void **state)
{
    (void)state;
    /* the domain is widened to the ticks: data at both ends lands inside the plot */
    struct dt_scale s;
    assert_true(dt_scale_fit(&s, DT_SCALE_LINEAR, 3, 97, 100, 600));
    assert_true(s.lo <= 3 && s.hi >= 97);
    assert_true(dt_scale_px(&s, 0) == 100 && dt_scale_px(&s, 100) == 600);
    assert_false(dt_scale_fit(&s, DT_SCALE_LINEAR, NAN, 1, 0, 1));
    /* a log axis places by ratio: 1, 10, 100 evenly */
    assert_true(dt_scale_fit(&s, DT_SCALE_LOG, 1, 100, 0, 200));
    assert_true(fabs(dt_scale_px(&s, 10) - 100) < 1e-9);
    assert_true(isnan(dt_scale_px(&s, 0)) && isnan(dt_scale_px(&s, -1)));
    /* nothing above zero: nothing to draw; some: the rest is left out */
    assert_false(dt_scale_fit(&s, DT_SCALE_LOG, -5, 0, 0, 1));
    assert_true(dt_scale_fit(&s, DT_SCALE_LOG, -5, 3, 0, 1));
    assert_true(s.lo > 0 && s.hi >= 3);
}

static void labels(void **state)
{
    (void)state;
    char b[32];
    dt_scale_label(1500, 500, b, sizeof b);
    assert_string_equal(b, "1.5k");
    dt_scale_label(65536, 0, b, sizeof b);
    assert_string_equal(b, "65.5k");
    dt_scale_label(2e9, 1e9, b, sizeof b);
    assert_string_equal(b, "2G");
    dt_scale_label(0.30000000000000004, 0.1, b, sizeof b);
    assert_string_equal(b, "0.3");
    dt_scale_label(3e-4, 0, b, sizeof b);
    assert_string_equal(b, "0.0003");
    dt_scale_label(1.2425, 0, b, sizeof b);
    assert_string_equal(b, "1.24");
}

// ---------------------------------------------------------------- thinning

static void thin_keeps_min_max(void **state)
{
    (void)state;
    /* 10 points over 2 columns: each column's least and greatest, in x order */
    double x[10], y[10] = {5, 3, 9, 4, 6, 2, 8, 7, 1, 6}, kx[4], ky[4];
    for (int i = 0; i < 10; i++) x[i] = i;
    size_t n = dt_thin(x, y, 10, 0, 10, 2, false, kx, ky);
    assert_int_equal(n, 4);
    /* column 0 (x 0..4): min 3 at x=1, max 9 at x=2; column 1 (x 5..9): max 8 at x=6, min 1 at x=8 */
    double want_x[] = {1, 2, 6, 8}, want_y[] = {3, 9, 8, 1};
    for (size_t i = 0; i < n; i++) {
        assert_true(kx[i] == want_x[i]);
        assert_true(ky[i] == want_y[i]);
    }
}

static void thin_spike_survives(void **state)
{
    (void)state;
    enum { N = 100000, COLUMNS = 500 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *kx = malloc(2 * COLUMNS * sizeof *kx),
           *ky = malloc(2 * COLUMNS * sizeof *ky);
    assert_true(x && y && kx && ky);
    for (int i = 0; i < N; i++) x[i] = i + 1, y[i] = 2 + sin(i / 7.0) * 0.05;
    y[55555] = 40;  /* one step's loss jumps */
    y[77777] = -3;  /* and one dips */
    y[100] = NAN;   /* a null in the records */
    size_t n = dt_thin(x, y, N, 0, N, COLUMNS, false, kx, ky);
    assert_true(n <= 2 * COLUMNS);
    assert_true(n >= COLUMNS); /* every column has points: each keeps its two */
    bool spike = false, dip = false;
    for (size_t i = 0; i < n; i++) {
        spike |= kx[i] == 55556 && ky[i] == 40;
        dip |= kx[i] == 77778 && ky[i] == -3;
        assert_false(isnan(ky[i]));
        if (i) assert_true(kx[i] > kx[i - 1]); /* in x order */
    }
    assert_true(spike && dip);
    /* a log axis: the dip (below zero) cannot be drawn and is left out */
    n = dt_thin(x, y, N, 0, N, COLUMNS, true, kx, ky);
    for (size_t i = 0; i < n; i++) assert_true(ky[i] > 0);
    free(x), free(y), free(kx), free(ky);
}

static void thin_small(void **state)
{
    (void)state;
    double x[1] = {3}, y[1] = {1.5}, kx[2], ky[2];
    assert_int_equal(dt_thin(x, y, 0, 0, 10, 100, false, kx, ky), 0);
    assert_int_equal(dt_thin(x, y, 1, 0, 10, 100, false, kx, ky), 1);
    assert_true(kx[0] == 3 && ky[0] == 1.5);
    /* fewer points than columns: every point kept */
    double xs[3] = {1, 2, 3}, ys[3] = {4, 5, 6}, kxs[6], kys[6];
    assert_int_equal(dt_thin(xs, ys, 3, 0, 3, 300, false, kxs, kys), 3);
    y[0] = INFINITY;
    assert_int_equal(dt_thin(x, y, 1, 0, 10, 100, false, kx, ky), 0);
}

// ---------------------------------------------------------------- escaping and SVG

static void escaping(void **state)
{
    (void)state;
    struct dt_out o = {0};
    dt_out_text(&o, "a<b & \"c\" 'd'>\x01\xff\xc3\xa9\n");
    assert_string_equal(o.p, "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9\n");
    dt_out_free(&o);
    /* truncated and overlong UTF-8, a surrogate */
    dt_out_text(&o, "\xe2\x82 \xc0\xaf \xed\xa0\x80");
    assert_string_equal(o.p, "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    dt_out_free(&o);
    dt_svg_text(&o, 1, 2.25, "class=\"t\"", "x<y");
    assert_string_equal(o.p, "<text x=\"1.0\" y=\"2.2\" class=\"t\">x&lt;y</text>\n");
    dt_out_free(&o);
    double x[2] = {0, 10.04}, y[2] = {5, 6};
    dt_svg_line(&o, x, y, 2, "stroke=\"red\"");
    dt_svg_line(&o, x, y, 0, "stroke=\"red\""); /* nothing */
    dt_svg_line(&o, x, y, 1, "stroke=\"red\""); /* a dot */
    assert_string_equal(o.p, "<path stroke=\"red\" d=\"M0.0 5.0 10.0 6.0\"/>\n"
                             "<path stroke=\"red\" d=\"M0.0 5.0h0.1\"/>\n");
    dt_out_free(&o);
    char *s = dt_out_format("%d<%s", 3, "&");
    assert_string_equal(s, "3<&");
    free(s);
}

// ---------------------------------------------------------------- reading a run

#define HEAD                                                                                              \
    "{\"schema_version\":1,\"id\":\"00000000000000aa-%s-r0-%d\",\"type\":\"%s\",\"run_name\":\"r<&\\\"\",\"rank\":0"
static void line(FILE *f, const char *start, int seq, const char *type, const char *rest)
{
    fprintf(f, HEAD "%s}\n", start, seq, type, rest);
}

static void read_resumed(void **state)
{
    (void)state;
    assert_int_equal(mkdir("run", 0777), 0);
    FILE *f = fopen("run/events.jsonl", "w");
    assert_non_null(f);
    line(f, "11111111", 1, "run_started", ",\"restart_count\":0,\"world\":{\"description\":\"w1\"},\"resumed\":null");
    for (int s = 1; s <= 12; s++) {
        char m[200];
        snprintf(m, sizeof m, ",\"step\":%d,\"tokens\":%d,\"loss\":%g,\"grad_norm\":%s,\"step_ms_breakdown\":"
                 "{\"forward\":1,\"backward\":2}", s, s * 64, 5.0 - s * 0.1, s == 4 ? "null" : "1.5");
        line(f, "11111111", s + 1, "metrics", m);
    }
    line(f, "11111111", 14, "checkpoint_saved", ",\"step\":10,\"bytes\":1000000,\"seconds\":0.5");
    line(f, "11111111", 14, "checkpoint_saved", ",\"step\":10,\"bytes\":1000000,\"seconds\":0.5"); /* again */
    fprintf(f, HEAD, "11111111", 15, "metrics"); /* killed mid-write ... */
    line(f, "22222222", 1, "run_started", /* ... and the next life appended to the torn line */
         ",\"restart_count\":1,\"world\":{\"description\":\"w2\"},\"resumed\":{\"path\":\"c\",\"step\":10}");
    for (int s = 11; s <= 14; s++) {
        char m[200];
        snprintf(m, sizeof m, ",\"step\":%d,\"tokens\":%d,\"loss\":%g", s, s * 64, 4.0 - s * 0.1);
        line(f, "22222222", s, "metrics", m);
    }
    line(f, "22222222", 20, "eval", ",\"step\":14,\"val_loss\":2.5");
    line(f, "22222222", 21, "run_finished", ",\"steps\":14,\"loss\":2.6,\"val_loss\":2.5,\"seconds\":3");
    fputs("{\"schema_version\":1,\"id\":\"00000000000000aa-22222222-r0-22\",\"type\":\"met", f); /* torn last line */
    fclose(f);
    dt_test_write("run/config.yaml", "run: {name: \"a<b\"}\ndata: {train: null, synthetic: {kind: markov, order: 1, "
                  "alphabet: 32, support: 4}}\nmodel: {seq_len: 32}\noptimizer: {betas: [0.9, 0.95]}\n");
    struct dt_report_run r;
    assert_int_equal(dt_report_run_read("run", &r), DT_SUCCESS);
    assert_string_equal(r.name, "r<&\"");
    /* one curve: steps 1..10 of the first life, 11..14 of the second */
    assert_int_equal(r.n, 14);
    for (size_t i = 0; i < r.n; i++) assert_true(r.col[DT_COL_STEP][i] == (double)(i + 1));
    assert_true(fabs(r.col[DT_COL_LOSS][10] - 2.9) < 1e-9);
    assert_true(isnan(r.col[DT_COL_GRAD_NORM][3])); /* null: a skipped step */
    assert_int_equal(r.phases.n, 2);
    assert_true(r.phases.col[1][0] == 2 && isnan(r.phases.col[1][12]));
    assert_int_equal(r.neval, 1);
    assert_int_equal(r.nlives, 2);
    assert_int_equal(r.life[1].from_step, 10);
    assert_int_equal(r.life[1].last_step, 14);
    assert_int_equal(r.life[1].restart_count, 1);
    assert_string_equal(r.life[0].ended, "no last word (killed?)");
    assert_non_null(strstr(r.life[1].ended, "run finished: 14 steps"));
    /* start, the checkpoint once, start, end */
    assert_int_equal(r.nev, 4);
    assert_int_equal(r.ev[2].kind, DT_EV_START);
    assert_int_equal(r.ev[2].step, 10);
    /* the notes: the torn record in the middle, the torn last line */
    assert_int_equal(r.nnotes, 2);
    assert_non_null(strstr(r.note[0], "run/events.jsonl:16: a record torn by a crash"));
    assert_string_equal(r.note[1], "run/events.jsonl:23: the last line is torn (the run was killed while writing "
                        "it): skipped");
    /* the config: by dotted key, flow values for lists; the source's best possible loss */
    bool found = false;
    for (size_t i = 0; i < r.nkeys; i++)
        found |= !strcmp(r.key[i], "optimizer.betas") && !strcmp(r.value[i], "[0.9, 0.95]");
    assert_true(found);
    assert_true(fabs(r.loss_floor - 1.2425) < 1e-3);
    assert_true(fabs(dt_report_tokens_at(&r, 12) - 768) < 1e-9);
    dt_report_run_free(&r);
    /* its page: the run name and the config's value escaped wherever they stand */
    char *dirs[] = {"run"};
    FILE *msg = fopen("/dev/null", "w");
    assert_int_equal(dt_report(1, dirs, "p.html", msg), DT_SUCCESS);
    fclose(msg);
    f = fopen("p.html", "r");
    assert_non_null(f);
    static char page[1 << 20];
    page[fread(page, 1, sizeof page - 1, f)] = '\0';
    fclose(f);
    assert_non_null(strstr(page, "<title>dtrun report: r&lt;&amp;&quot;</title>"));
    assert_non_null(strstr(page, "name: &quot;a&lt;b&quot;"));
    assert_null(strstr(page, "r<&"));
}

static void read_errors(void **state)
{
    (void)state;
    struct dt_report_run r;
    assert_int_equal(dt_report_run_read("nowhere", &r), DT_ERR_USAGE);
    assert_string_equal(dt_error_msg(), "nowhere: error: no such run directory\n  hint: give the run.dir of a run "
                        "(the directory with its events.jsonl and config.yaml)");
    dt_report_run_free(&r);
    assert_int_equal(mkdir("empty", 0777), 0);
    assert_int_equal(dt_report_run_read("empty", &r), DT_ERR_USAGE);
    assert_string_equal(dt_error_msg(), "empty: error: no events here (no events.jsonl), so there is nothing to "
                        "draw\n  hint: give the run.dir of a run that has started (a run with events.jsonl: null "
                        "keeps none)");
    dt_report_run_free(&r);
    dt_test_write("empty/events.jsonl", "not json\n{\"torn\":");
    assert_int_equal(dt_report_run_read("empty", &r), DT_ERR_USAGE);
    assert_string_equal(dt_error_msg(), "empty/events.jsonl: error: no event records in it (2 lines), so there is "
                        "nothing to draw\n  hint: a run writes its first record as it starts; give the run.dir of a "
                        "run that has started");
    dt_report_run_free(&r);
}

DT_TESTS(T(ticks), T(domains), T(labels), T(thin_keeps_min_max), T(thin_spike_survives), T(thin_small),
         T(escaping), T(read_resumed), T(read_errors))
