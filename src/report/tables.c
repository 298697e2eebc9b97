/*
 * tables.c - the report's sections under the charts: each run's lives (where each start ran, the
 * steps it trained, how it ended), its samples by step (events.sample_interval), every lifecycle event (folded away: a long run has many), and
 * the resolved config (config.yaml as the run saved it; for several runs first the keys whose
 * values differ).
 */
#include <string.h>
#include "report/page.h"

#define EVENTS_MAX 2000 /* listed per run; the timeline shows them all */

static void swatch(const struct dt_report_page *p, int r, struct dt_out *o)
{
    dt_out_printf(o, "<span class=\"swatch\" style=\"background:%s\"></span>", p->color[r]);
    dt_out_text(o, p->label[r]);
}

static void cell(struct dt_out *o, const char *text)
{
    dt_out_printf(o, "<td>");
    dt_out_text(o, text);
    dt_out_printf(o, "</td>");
}

static void lives(const struct dt_report_page *p, struct dt_out *o)
{
    dt_out_printf(o, "<h2>Lives</h2>\n<table><tr><th>run</th><th>life</th><th>started</th><th>steps</th>"
                  "<th>ended</th></tr>\n");
    for (int r = 0; r < p->nruns; r++)
        for (int i = 0; i < p->runs[r].nlives; i++) {
            const struct dt_report_life *l = &p->runs[r].life[i];
            dt_out_printf(o, "<tr><td>");
            swatch(p, r, o);
            dt_out_printf(o, "</td><td>%d (restart %d)</td>", i + 1, l->restart_count);
            cell(o, l->started ? l->started : "(its run_started record is missing)");
            dt_out_printf(o, "<td>%lld to %lld</td>", (long long)l->from_step, (long long)l->last_step);
            cell(o, l->ended ? l->ended : "no end recorded: still running, or killed");
            dt_out_printf(o, "</tr>\n");
        }
    dt_out_printf(o, "</table>\n");
}

/* the samples of every run by step (events.sample_interval), the prompt in its own cell */
static void samples(const struct dt_report_page *p, struct dt_out *o)
{
    size_t total = 0;
    for (int r = 0; r < p->nruns; r++) total += p->runs[r].nsamples;
    if (!total) return;
    dt_out_printf(o, "<h2>Samples (%zu)</h2>\n<table><tr><th>run</th><th>step</th><th>prompt</th><th>text</th>"
                  "</tr>\n", total);
    for (int r = 0; r < p->nruns; r++)
        for (size_t i = 0; i < p->runs[r].nsamples; i++) {
            const struct dt_report_sample *s = &p->runs[r].samples[i];
            dt_out_printf(o, "<tr><td>");
            swatch(p, r, o);
            dt_out_printf(o, "</td><td>%.0f</td>", s->step);
            cell(o, s->prompt);
            dt_out_printf(o, "<td class=\"sample\">");
            dt_out_text(o, s->text);
            dt_out_printf(o, "</td></tr>\n");
        }
    dt_out_printf(o, "</table>\n");
}

static void events(const struct dt_report_page *p, struct dt_out *o)
{
    size_t total = 0;
    for (int r = 0; r < p->nruns; r++) total += p->runs[r].nev;
    dt_out_printf(o, "<details><summary>All lifecycle events (%zu)</summary>\n<table><tr><th>run</th><th>step</th>"
                  "<th>event</th></tr>\n", total);
    for (int r = 0; r < p->nruns; r++) {
        const struct dt_report_run *run = &p->runs[r];
        for (size_t i = 0; i < run->nev && i < EVENTS_MAX; i++) {
            dt_out_printf(o, "<tr%s><td>", run->ev[i].bad ? " class=\"bad\"" : "");
            swatch(p, r, o);
            dt_out_printf(o, "</td><td>%lld</td>", (long long)run->ev[i].step);
            cell(o, run->ev[i].what);
            dt_out_printf(o, "</tr>\n");
        }
        if (run->nev > EVENTS_MAX)
            dt_out_printf(o, "<tr><td colspan=\"3\">... and %zu more</td></tr>\n", run->nev - EVENTS_MAX);
    }
    dt_out_printf(o, "</table></details>\n");
}

static const char *value_of(const struct dt_report_run *run, const char *key)
{
    for (size_t i = 0; i < run->nkeys; i++)
        if (!strcmp(run->key[i], key)) return run->value[i];
    return NULL;
}

/* whether key was met in an earlier run, or earlier in this one (it is listed once) */
static bool listed(const struct dt_report_page *p, int r, size_t k)
{
    for (int q = 0; q <= r; q++)
        for (size_t i = 0; i < (q < r ? p->runs[q].nkeys : k); i++)
            if (!strcmp(p->runs[q].key[i], p->runs[r].key[k])) return true;
    return false;
}

/* the keys whose values are not the same in every run (missing counts as a value) */
static void differences(const struct dt_report_page *p, struct dt_out *o)
{
    struct dt_out rows = {0};
    int n = 0;
    for (int r = 0; r < p->nruns; r++)
        for (size_t k = 0; k < p->runs[r].nkeys; k++) {
            const char *key = p->runs[r].key[k], *first = value_of(&p->runs[0], key);
            bool same = true;
            for (int q = 1; q < p->nruns && same; q++) {
                const char *v = value_of(&p->runs[q], key);
                same = first && v && !strcmp(first, v);
            }
            if (same || listed(p, r, k)) continue;
            n++;
            dt_out_printf(&rows, "<tr>");
            cell(&rows, key);
            for (int q = 0; q < p->nruns; q++) {
                const char *v = value_of(&p->runs[q], key);
                cell(&rows, v ? v : "(not set)");
            }
            dt_out_printf(&rows, "</tr>\n");
        }
    dt_out_printf(o, "<h2>Config: the keys that differ (%d)</h2>\n", n);
    if (n) {
        dt_out_printf(o, "<table id=\"config-diff\"><tr><th>key</th>");
        for (int r = 0; r < p->nruns; r++) {
            dt_out_printf(o, "<th>");
            swatch(p, r, o);
            dt_out_printf(o, "</th>");
        }
        dt_out_printf(o, "</tr>\n%s</table>\n", rows.p ? rows.p : "");
    } else {
        dt_out_printf(o, "<p>None: the runs' configs are the same.</p>\n");
    }
    if (rows.oom) o->oom = true;
    dt_out_free(&rows);
}

static void config(const struct dt_report_page *p, struct dt_out *o)
{
    if (p->nruns > 1) differences(p, o);
    else dt_out_printf(o, "<h2>Config</h2>\n");
    for (int r = 0; r < p->nruns; r++) {
        const struct dt_report_run *run = &p->runs[r];
        dt_out_printf(o, "<details%s><summary>", p->nruns == 1 ? " open=\"open\"" : "");
        swatch(p, r, o);
        dt_out_printf(o, ": config.yaml, resolved, as the run saved it</summary>\n<pre>");
        dt_out_text(o, run->config_text ? run->config_text : "(no config.yaml in the run.dir)");
        dt_out_printf(o, "</pre></details>\n");
    }
}

void dt_report_tables(const struct dt_report_page *p, struct dt_out *o)
{
    dt_out_printf(o, "<section>\n");
    lives(p, o);
    samples(p, o);
    events(p, o);
    config(p, o);
    dt_out_printf(o, "</section>\n");
}
