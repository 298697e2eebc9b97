/*
 * run.h - what `dtrun report` knows of one run, read from what the run left in its run.dir:
 * events.jsonl (every record, whatever rank wrote it, duplicates dropped by id) and config.yaml.
 *
 * It reads a run whatever happened to it. A line torn by a kill mid-write is skipped with a note
 * (and the record a later life appended to it is recovered). A run resumed several times is one
 * curve: each start's run_started says the step it resumed from, and the steps a killed life had
 * trained past that point, trained again by the next, are dropped. Each start is a life, told by
 * the start token in every record's id.
 */
#ifndef DT_REPORT_RUN_H
#define DT_REPORT_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

/* the numbers of a metrics record, one column each; NAN where a record has none (null) */
enum dt_report_col {
    DT_COL_STEP, DT_COL_TOKENS, DT_COL_LOSS, DT_COL_LR, DT_COL_GRAD_NORM, DT_COL_LOSS_SCALE, DT_COL_SKIPPED,
    DT_COL_TOKENS_PER_S, DT_COL_MFU, DT_COL_STEP_MS, DT_COL_HOST_MEM, DT_COL_DEV_ALLOC, DT_COL_DEV_RESERVED,
    DT_NCOLS
};

/* the members of one object of the metrics (step_ms_breakdown, op_ms), a column each */
#define DT_REPORT_GROUP_MAX 64
struct dt_report_group {
    int n;
    char *name[DT_REPORT_GROUP_MAX];
    double *col[DT_REPORT_GROUP_MAX];
};

/* what the timeline shows, one row each */
enum dt_report_kind {
    DT_EV_START, DT_EV_CKPT_SAVED, DT_EV_CKPT_FAILED, DT_EV_PREEMPTED, DT_EV_TASK_FAILED, DT_EV_END, DT_EV_NKINDS
};

struct dt_report_event {
    enum dt_report_kind kind;
    int64_t step;
    int life;
    bool bad; /* a failure: checkpoint_failed, task_failed, run_failed */
    char *what;
};

/* one start of the run */
struct dt_report_life {
    char start[16];    /* the start token of its records' ids */
    int64_t from_step; /* the step it resumed from (0: from scratch) */
    int64_t last_step; /* the last step it reported */
    int restart_count;
    char *started;     /* when, on which world and device (NULL when its run_started was lost) */
    char *ended;       /* how it ended, as its last record says (NULL: no record says) */
};

struct dt_report_sample {
    double step;
    char *prompt, *text;
};

struct dt_report_run {
    char *dir, *events_path;
    char *name; /* run_name of its records */
    /* the metrics records, steps ascending */
    size_t n, cap;
    double *col[DT_NCOLS];
    struct dt_report_group phases, ops;
    /* the eval records */
    size_t neval, eval_cap;
    double *eval_step, *eval_loss;
    /* the sample records (events.sample_interval): step, prompt and text, in the order written */
    struct dt_report_sample *samples;
    size_t nsamples, samples_cap;
    struct dt_report_event *ev;
    size_t nev, ev_cap;
    struct dt_report_life *life;
    int nlives;
    double loss_floor; /* the synthetic source's best possible loss; NAN: not known */
    char *config_text; /* config.yaml as written; NULL: none */
    /* config.yaml's values by dotted key, in file order */
    char **key, **value;
    size_t nkeys;
    char **note; /* what the page should say about reading it (torn lines, no config) */
    int nnotes;
    size_t records, lines_skipped;
};

/* Read the run in `dir` (a run.dir, or an events file itself: a copy of events.jsonl, a webhook
 * receiver's log). Fails, with the message, when there is no event record to draw. r is ready for
 * dt_report_run_free however this returns. */
dt_status_t dt_report_run_read(const char *dir, struct dt_report_run *r);
void dt_report_run_free(struct dt_report_run *r);
/* The tokens trained by `step`, from the metrics around it (NAN before the first) */
double dt_report_tokens_at(const struct dt_report_run *r, double step);

#endif
