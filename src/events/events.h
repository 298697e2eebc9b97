/*
 * events.h - the run's event records and the sinks they go to.
 *
 * Every record is one JSON object (src/events/events.schema.json) with a
 * common head: schema_version, id (run id, a token of this start of the run,
 * rank and a per-rank sequence number: unique across resumes too, so
 * receivers drop duplicates), type, time (ISO-8601 UTC),
 * run_id, run_name, rank and the Slurm job/step/restart ids. The same
 * document goes to every sink: the console (a progress line), the JSONL file
 * and the webhook.
 *
 * Rank 0 sends run_started, metrics (already reduced over ranks), eval,
 * checkpoint and preemption records and run_finished; run_failed comes from
 * the rank that saw the failure, so the other ranks open the webhook only.
 */
#ifndef DT_EVENTS_H
#define DT_EVENTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "config/config.h"
#include "core/status.h"
#include "events/json.h"

#define DT_EVENTS_SCHEMA_VERSION 1

enum dt_event_type {
    DT_EV_RUN_STARTED,
    DT_EV_METRICS,
    DT_EV_EVAL,
    DT_EV_CHECKPOINT_SAVED,
    DT_EV_CHECKPOINT_FAILED,
    DT_EV_PREEMPTED,
    DT_EV_RUN_FINISHED,
    DT_EV_RUN_FAILED,
    DT_EV_SAMPLE,
    DT_EV_NTYPES
};
const char *dt_event_type_str(enum dt_event_type t);

/* One metrics record; NaN where a value does not exist (null in JSON). */
struct dt_metrics {
    int64_t step, steps, epoch, tokens, samples, skipped_steps;
    bool fp8;              /* fp8-mixed: fp8_overflows is reported */
    int64_t fp8_overflows; /* tensors that overflowed their delayed scale so far (kernels.h, fp8_update) */
    double loss, lr, grad_norm, loss_scale;
    double tokens_per_s, samples_per_s, mfu, eta_s;
    double step_ms; /* the slowest rank's */
    bool breakdown; /* forward/backward/comm/optimizer measured (events.wall_clock_breakdown) */
    double forward_ms, backward_ms, comm_ms, optimizer_ms;
    /* and op by op (kernels/profile.h): nops names and their ms per step */
    int nops;
    const char *const *op_names;
    const double *op_ms;
    int64_t peak_memory_bytes; /* resident set high-water mark of this process */
    bool device_memory;        /* a GPU run: the two below are its rank 0's device memory (kernels.h) */
    int64_t device_peak_allocated_bytes, device_reserved_bytes;
};

/* What run_started reports, besides the config itself. */
struct dt_run_info {
    const char *model;       /* "GPT 12 layers" */
    int64_t params, steps;
    const char *world;       /* how the world was found */
    const char *device;      /* this rank's device line */
    const char *strategy, *precision;
    /* this rank's model state as the strategy allocated it (master: fp32 master weights; gathered:
     * units gathered or widened for the model), its workspace (buffers: gradient scratch and
     * conversions), and the largest model state over ranks */
    int64_t param_bytes, grad_bytes, master_bytes, optimizer_bytes, gathered_bytes, buffer_bytes, activation_bytes;
    int64_t state_max_bytes;
    const char *resumed_from; /* the checkpoint this run goes on from, NULL: a fresh start */
    int64_t resumed_step;
};

/* What a sink receives. */
struct dt_event {
    enum dt_event_type type;
    const char *json;                 /* the document */
    const struct dt_metrics *metrics; /* DT_EV_METRICS */
    int64_t step;
    double value;                     /* DT_EV_EVAL: the validation loss */
    const char *text;                 /* DT_EV_SAMPLE: the generated text */
};

struct dt_sink {
    const char *name;
    dt_status_t (*emit)(struct dt_sink *s, const struct dt_event *e);
    /* deliver what is pending within deadline seconds, then release everything */
    void (*close)(struct dt_sink *s, double deadline);
    void *ctx;
};

#define DT_EVENTS_MAX_SINKS 4

struct dt_events {
    char run_id[40], run_name[128], job_id[32], step_id[32];
    char start[12]; /* this start of the run (a resumed run keeps its run id): ids stay unique */
    int rank, restarts;
    int64_t seq;
    struct dt_sink *sinks[DT_EVENTS_MAX_SINKS];
    int nsinks;
    struct dt_json json;
    const struct dt_config *cfg;
    double flush_timeout;
};

struct dt_world;
struct dt_webhook_cfg;

/*
 * Open the sinks this rank writes to: on rank 0 the console, events.jsonl, events.prometheus (when
 * set) and the webhook (when events.webhook.url is set), on the others the webhook only. run_id is
 * the same on every rank.
 */
dt_status_t dt_events_open(struct dt_events *ev, const struct dt_config *cfg, const struct dt_world *w,
                           const char *run_id);
/* Flush (the webhook within events.webhook.flush_timeout) and close every sink. */
void dt_events_close(struct dt_events *ev);

dt_status_t dt_events_run_started(struct dt_events *ev, const struct dt_run_info *info);
dt_status_t dt_events_metrics(struct dt_events *ev, const struct dt_metrics *m);
dt_status_t dt_events_eval(struct dt_events *ev, int64_t step, double val_loss);
/* A sample generated from the weights after step (events.sample_interval): the prompt, the new text,
 * and the new tokens' count. */
dt_status_t dt_events_sample(struct dt_events *ev, int64_t step, const char *prompt, const char *text, int64_t tokens,
                             double logprob);
/* bytes of every rank's file, seconds from the copy to the commit (mb_per_s follows) */
dt_status_t dt_events_checkpoint_saved(struct dt_events *ev, int64_t step, const char *path, int64_t bytes,
                                       double seconds);
dt_status_t dt_events_checkpoint_failed(struct dt_events *ev, int64_t step, const char *path, const char *error);
dt_status_t dt_events_preempted(struct dt_events *ev, int64_t step, const char *signal, bool checkpointed);
dt_status_t dt_events_run_finished(struct dt_events *ev, int64_t steps, double loss, double val_loss, double seconds,
                                   int64_t tokens);
dt_status_t dt_events_run_failed(struct dt_events *ev, int64_t step, const char *error);

/* `dtrun events flush RUN_DIR`: send RUN_DIR's spools with cfg's webhook; an error if some stay. */
dt_status_t dt_events_flush(const struct dt_config *cfg, const char *run_dir, FILE *out);
/* `dtrun events example`: one record of each type, as JSON lines (for receivers and the schema test). */
dt_status_t dt_events_example(const struct dt_config *cfg, const struct dt_world *w, FILE *out);
/* `dtrun bench events URL`: events/s the webhook sender delivers, for several batch sizes. */
dt_status_t dt_events_bench(const char *url, int n, FILE *out);

/* The config's hash as run_started and checkpoints carry it ("" when out of memory). */
void dt_events_config_hash(const struct dt_config *cfg, char *out, size_t n);
/* The training keys (those the hash covers) whose values differ, as "key: A there, B here; ..." (the
 * first four, then how many more) in out; how many differ. */
int dt_events_config_diff(const struct dt_config *was, const struct dt_config *now, char *out, size_t n);
/* The wall clock now, ISO-8601 UTC with milliseconds. */
void dt_events_iso_now(char *buf, size_t n);
/* A fresh run id: 16 hex digits from the kernel's random source. */
void dt_events_new_run_id(char out[40]);
/* sha256:<hex> (or fnv1a64:<hex> in a build without libcrypto) of the text. */
void dt_events_hash(const char *text, char *out, size_t n);

/* Where events.jsonl goes: an absolute path as it is, a relative one under run.dir; "" when off. */
void dt_events_jsonl_path(const struct dt_config *cfg, char *buf, size_t n);
/* The sinks, for dt_events_open and tests. */
dt_status_t dt_sink_console(const struct dt_config *cfg, struct dt_sink **out);
dt_status_t dt_sink_jsonl(const char *path, struct dt_sink **out);
dt_status_t dt_sink_webhook(const struct dt_config *cfg, const char *spool, struct dt_sink **out);
/* events.prometheus (prometheus.c): path must end in .prom; its labels are ev's run and rank */
dt_status_t dt_sink_prometheus(const struct dt_events *ev, const char *path, struct dt_sink **out);
/* The webhook settings of cfg, checked: the URL, ${VAR}s in headers and the secret's variable. */
dt_status_t dt_webhook_cfg_from(const struct dt_config *cfg, const char *spool, struct dt_webhook_cfg *out,
                                char **headers, char **secret);

#endif
