/* events.c - the records of events.h, built once and handed to every sink. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include "dt_build_config.h"
#include "config/schema.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "events/events.h"
#include "events/jsonl.h"
#include "launch/world.h"
#ifdef HAVE_CRYPTO
#include <openssl/evp.h>
#endif

static const char *const type_names[DT_EV_NTYPES] = {
    "run_started", "metrics", "eval", "checkpoint_saved", "checkpoint_failed", "preempted", "run_finished", "run_failed", "sample",
};

const char *dt_event_type_str(enum dt_event_type t) { return t < DT_EV_NTYPES ? type_names[t] : "?"; }

void dt_events_new_run_id(char out[40])
{
    unsigned char b[8] = {0};
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        struct timespec ts; /* no entropy source: time and pid still differ between runs */
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        memcpy(b, &x, sizeof b);
    }
    for (int i = 0; i < 8; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

void dt_events_hash(const char *text, char *out, size_t n)
{
#ifdef HAVE_CRYPTO
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_Digest(text, strlen(text), md, &len, EVP_sha256(), NULL) == 1) {
        size_t o = (size_t)snprintf(out, n, "sha256:");
        for (unsigned i = 0; i < len && o + 2 < n; i++, o += 2) snprintf(out + o, n - o, "%02x", md[i]);
        return;
    }
#endif
    uint64_t h = 0xcbf29ce484222325u;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) h = (h ^ *p) * 0x100000001b3u;
    snprintf(out, n, "fnv1a64:%016llx", (unsigned long long)h);
}

/* Whether key k is part of the training config: events.* (where the records go) and run.dir stay
 * out, so the same training hashes the same wherever it reports. */
static bool trains(const struct dt_key *k) { return strncmp(k->path, "events.", 7) && strcmp(k->path, "run.dir"); }

/* The training config as path=value lines. */
static char *config_text(const struct dt_config *cfg)
{
    size_t cap = 1 << 14, len = 0;
    char *s = malloc(cap);
    for (size_t i = 0; s && i < dt_config_schema.n; i++) {
        const struct dt_key *k = &dt_config_schema.keys[i];
        if (!trains(k)) continue;
        char val[2048];
        dt_value_format(k, DT_FIELD(cfg, k), val, sizeof val);
        size_t need = strlen(k->path) + strlen(val) + 3;
        if (len + need >= cap) {
            char *b = realloc(s, cap = 2 * cap + need);
            if (!b) break;
            s = b;
        }
        len += (size_t)snprintf(s + len, cap - len, "%s=%s\n", k->path, val);
    }
    return s;
}

void dt_events_config_hash(const struct dt_config *cfg, char *out, size_t n)
{
    char *text = config_text(cfg);
    out[0] = '\0';
    if (text) dt_events_hash(text, out, n);
    free(text);
}

int dt_events_config_diff(const struct dt_config *was, const struct dt_config *now, char *out, size_t n)
{
    int count = 0;
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < dt_config_schema.n; i++) {
        const struct dt_key *k = &dt_config_schema.keys[i];
        char a[2048], b[2048];
        if (!trains(k)) continue;
        dt_value_format(k, DT_FIELD(was, k), a, sizeof a);
        dt_value_format(k, DT_FIELD(now, k), b, sizeof b);
        if (!strcmp(a, b)) continue;
        if (++count <= 4 && len < n)
            len += (size_t)snprintf(out + len, n - len, "%s%s: %s there, %s here", count > 1 ? "; " : "", k->path, a, b);
    }
    if (count > 4 && len < n) snprintf(out + len, n - len, "; and %d more", count - 4);
    return count;
}

void dt_events_iso_now(char *buf, size_t n)
{
    struct timespec ts = dt_wall_now();
    dt_json_iso_time(ts.tv_sec, (int)(ts.tv_nsec / 1000000), buf, n);
}

static void head(struct dt_events *ev, enum dt_event_type t)
{
    char id[96], now[40];
    snprintf(id, sizeof id, "%s-%s-r%d-%lld", ev->run_id, ev->start, ev->rank, (long long)++ev->seq);
    dt_events_iso_now(now, sizeof now);
    struct dt_json *j = &ev->json;
    dt_json_begin(j);
    dt_json_int(j, "schema_version", DT_EVENTS_SCHEMA_VERSION);
    dt_json_str(j, "id", id);
    dt_json_str(j, "type", dt_event_type_str(t));
    dt_json_str(j, "time", now);
    dt_json_str(j, "run_id", ev->run_id);
    dt_json_str(j, "run_name", ev->run_name);
    dt_json_int(j, "rank", ev->rank);
    dt_json_str(j, "job_id", ev->job_id[0] ? ev->job_id : NULL);
    dt_json_str(j, "step_id", ev->step_id[0] ? ev->step_id : NULL);
    dt_json_int(j, "restart_count", ev->restarts);
}

/* The finished document to every sink; the first error is returned, every sink still gets it. */
static dt_status_t send(struct dt_events *ev, struct dt_event *e)
{
    e->json = dt_json_end(&ev->json);
    if (!e->json) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory writing a %s event",
                                  dt_event_type_str(e->type));
    dt_status_t rc = DT_SUCCESS;
    for (int i = 0; i < ev->nsinks; i++) {
        dt_status_t r = ev->sinks[i]->emit(ev->sinks[i], e);
        if (rc == DT_SUCCESS) rc = r;
    }
    return rc;
}

/* An events.* file's path: an absolute one as it is, a relative one under run.dir. */
static void run_path(const struct dt_config *cfg, const char *file, char *buf, size_t n)
{
    if (file[0] == '/') snprintf(buf, n, "%s", file);
    else snprintf(buf, n, "%s/%s", cfg->run.dir, file);
}

void dt_events_jsonl_path(const struct dt_config *cfg, char *buf, size_t n)
{
    if (!cfg->events.jsonl) snprintf(buf, n, "%s", "");
    else run_path(cfg, cfg->events.jsonl, buf, n);
}

/* The sinks this rank writes to (events.h). */
static dt_status_t open_sinks(struct dt_events *ev, const struct dt_config *cfg, int rank)
{
    char path[4200];
    if (rank == 0) {
        DT_CHECK(dt_sink_console(cfg, &ev->sinks[ev->nsinks]));
        ev->nsinks++;
        if (cfg->events.jsonl) {
            dt_events_jsonl_path(cfg, path, sizeof path);
            DT_CHECK(dt_sink_jsonl(path, &ev->sinks[ev->nsinks]));
            ev->nsinks++;
        }
        if (cfg->events.prometheus) {
            run_path(cfg, cfg->events.prometheus, path, sizeof path);
            DT_CHECK(dt_sink_prometheus(ev, path, &ev->sinks[ev->nsinks]));
            ev->nsinks++;
        }
    }
    if (cfg->events.webhook.url) {
        DT_CHECK(dt_mkdirs(cfg->run.dir)); /* every rank's spool lives there; rank 0 may not have made it yet */
        if (rank == 0) snprintf(path, sizeof path, "%s/events.spool", cfg->run.dir);
        else snprintf(path, sizeof path, "%s/events.rank%d.spool", cfg->run.dir, rank);
        DT_CHECK(dt_sink_webhook(cfg, path, &ev->sinks[ev->nsinks]));
        ev->nsinks++;
    }
    return DT_SUCCESS;
}

dt_status_t dt_events_open(struct dt_events *ev, const struct dt_config *cfg, const struct dt_world *w,
                           const char *run_id)
{
    *ev = (struct dt_events){.rank = w->rank, .restarts = w->restarts, .cfg = cfg,
                             .flush_timeout = cfg->events.webhook.flush_timeout};
    snprintf(ev->run_id, sizeof ev->run_id, "%s", run_id);
    char fresh[40];
    dt_events_new_run_id(fresh);
    snprintf(ev->start, sizeof ev->start, "%.8s", fresh);
    snprintf(ev->run_name, sizeof ev->run_name, "%s", cfg->run.name);
    snprintf(ev->job_id, sizeof ev->job_id, "%s", w->job_id);
    snprintf(ev->step_id, sizeof ev->step_id, "%s", w->step_id);
    dt_status_t rc = open_sinks(ev, cfg, w->rank);
    if (rc != DT_SUCCESS) dt_events_close(ev); /* the ones already open */
    return rc;
}

void dt_events_close(struct dt_events *ev)
{
    for (int i = 0; i < ev->nsinks; i++) ev->sinks[i]->close(ev->sinks[i], ev->flush_timeout);
    ev->nsinks = 0;
    dt_json_free(&ev->json);
}

dt_status_t dt_events_run_started(struct dt_events *ev, const struct dt_run_info *in)
{
    const struct dt_config *cfg = ev->cfg;
    head(ev, DT_EV_RUN_STARTED);
    struct dt_json *j = &ev->json;
    char hash[80];
    dt_events_config_hash(cfg, hash, sizeof hash);
    dt_json_str(j, "config_hash", hash[0] ? hash : NULL);
    dt_json_obj(j, "config");
    dt_json_str(j, "model", in->model);
    dt_json_int(j, "params", in->params);
    dt_json_int(j, "steps", in->steps);
    dt_json_int(j, "global_batch", cfg->resolved.global_batch);
    dt_json_int(j, "micro_batch_size", cfg->data.micro_batch_size);
    dt_json_int(j, "gradient_accumulation_steps", cfg->compute.gradient_accumulation_steps);
    dt_json_int(j, "seq_len", cfg->model.type == DT_MODEL_MLP ? 1 : cfg->model.seq_len);
    dt_json_str(j, "optimizer", dt_enum_str(dt_optim_names, cfg->optimizer.type));
    dt_json_num(j, "lr", cfg->optimizer.lr);
    dt_json_int(j, "seed", cfg->run.seed);
    dt_json_str(j, "run_dir", cfg->run.dir);
    dt_json_close(j);
    dt_json_obj(j, "world");
    dt_json_int(j, "size", cfg->resolved.world);
    dt_json_int(j, "nodes", cfg->resolved.nodes);
    dt_json_int(j, "ranks_per_node", cfg->resolved.devices_per_node);
    dt_json_str(j, "description", in->world);
    dt_json_close(j);
    dt_json_str(j, "device", in->device);
    dt_json_str(j, "strategy", in->strategy);
    dt_json_str(j, "precision", in->precision);
    if (in->resumed_from) {
        dt_json_obj(j, "resumed");
        dt_json_str(j, "path", in->resumed_from);
        dt_json_int(j, "step", in->resumed_step);
        dt_json_close(j);
    } else {
        dt_json_str(j, "resumed", NULL);
    }
    dt_json_obj(j, "memory");
    int64_t state = in->param_bytes + in->grad_bytes + in->master_bytes + in->optimizer_bytes + in->gathered_bytes;
    dt_json_int(j, "params_bytes", in->param_bytes);
    dt_json_int(j, "grads_bytes", in->grad_bytes);
    dt_json_int(j, "master_bytes", in->master_bytes);
    dt_json_int(j, "optimizer_bytes", in->optimizer_bytes);
    dt_json_int(j, "gathered_bytes", in->gathered_bytes);
    dt_json_int(j, "buffers_bytes", in->buffer_bytes);
    dt_json_int(j, "model_state_bytes", state);
    dt_json_int(j, "model_state_max_bytes", in->state_max_bytes > state ? in->state_max_bytes : state);
    dt_json_int(j, "activations_bytes", in->activation_bytes);
    dt_json_int(j, "total_bytes", state + in->buffer_bytes + in->activation_bytes);
    dt_json_close(j);
    return send(ev, &(struct dt_event){.type = DT_EV_RUN_STARTED});
}

dt_status_t dt_events_metrics(struct dt_events *ev, const struct dt_metrics *m)
{
    head(ev, DT_EV_METRICS);
    struct dt_json *j = &ev->json;
    dt_json_int(j, "step", m->step);
    dt_json_int(j, "steps", m->steps);
    dt_json_int(j, "epoch", m->epoch);
    dt_json_int(j, "tokens", m->tokens);
    dt_json_int(j, "samples", m->samples);
    dt_json_num(j, "loss", m->loss);
    dt_json_num(j, "lr", m->lr);
    dt_json_num(j, "grad_norm", m->grad_norm);
    dt_json_num(j, "loss_scale", m->loss_scale);
    dt_json_int(j, "skipped_steps", m->skipped_steps);
    if (m->fp8) dt_json_int(j, "fp8_overflows", m->fp8_overflows);
    dt_json_num(j, "tokens_per_s", m->tokens_per_s);
    dt_json_num(j, "samples_per_s", m->samples_per_s);
    dt_json_num(j, "mfu", m->mfu);
    dt_json_num(j, "step_ms", m->step_ms);
    if (m->breakdown) {
        dt_json_obj(j, "step_ms_breakdown");
        dt_json_num(j, "forward", m->forward_ms);
        dt_json_num(j, "backward", m->backward_ms);
        dt_json_num(j, "comm", m->comm_ms);
        dt_json_num(j, "optimizer", m->optimizer_ms);
        dt_json_close(j);
    }
    if (m->nops > 0) {
        dt_json_obj(j, "op_ms");
        for (int i = 0; i < m->nops; i++) dt_json_num(j, m->op_names[i], m->op_ms[i]);
        dt_json_close(j);
    }
    dt_json_int(j, "peak_memory_bytes", m->peak_memory_bytes);
    if (m->device_memory) {
        dt_json_int(j, "device_peak_allocated_bytes", m->device_peak_allocated_bytes);
        dt_json_int(j, "device_reserved_bytes", m->device_reserved_bytes);
    }
    return send(ev, &(struct dt_event){.type = DT_EV_METRICS, .metrics = m, .step = m->step});
}

dt_status_t dt_events_eval(struct dt_events *ev, int64_t step, double val_loss)
{
    head(ev, DT_EV_EVAL);
    dt_json_int(&ev->json, "step", step);
    dt_json_num(&ev->json, "val_loss", val_loss);
    return send(ev, &(struct dt_event){.type = DT_EV_EVAL, .step = step, .value = val_loss});
}

dt_status_t dt_events_sample(struct dt_events *ev, int64_t step, const char *prompt, const char *text, int64_t tokens,
                             double logprob)
{
    head(ev, DT_EV_SAMPLE);
    dt_json_int(&ev->json, "step", step);
    dt_json_str(&ev->json, "prompt", prompt);
    dt_json_str(&ev->json, "text", text);
    dt_json_int(&ev->json, "tokens", tokens);
    dt_json_num(&ev->json, "logprob", logprob);
    return send(ev, &(struct dt_event){.type = DT_EV_SAMPLE, .step = step, .text = text});
}

dt_status_t dt_events_checkpoint_saved(struct dt_events *ev, int64_t step, const char *path, int64_t bytes,
                                       double seconds)
{
    head(ev, DT_EV_CHECKPOINT_SAVED);
    dt_json_int(&ev->json, "step", step);
    dt_json_str(&ev->json, "path", path);
    dt_json_int(&ev->json, "bytes", bytes);
    dt_json_num(&ev->json, "seconds", seconds);
    dt_json_num(&ev->json, "mb_per_s", seconds > 0 ? (double)bytes / seconds / 1e6 : NAN);
    return send(ev, &(struct dt_event){.type = DT_EV_CHECKPOINT_SAVED, .step = step});
}

dt_status_t dt_events_checkpoint_failed(struct dt_events *ev, int64_t step, const char *path, const char *error)
{
    head(ev, DT_EV_CHECKPOINT_FAILED);
    dt_json_int(&ev->json, "step", step);
    dt_json_str(&ev->json, "path", path);
    dt_json_str(&ev->json, "error", error);
    return send(ev, &(struct dt_event){.type = DT_EV_CHECKPOINT_FAILED, .step = step});
}

dt_status_t dt_events_preempted(struct dt_events *ev, int64_t step, const char *signal, bool checkpointed)
{
    head(ev, DT_EV_PREEMPTED);
    dt_json_int(&ev->json, "step", step);
    dt_json_str(&ev->json, "signal", signal);
    dt_json_bool(&ev->json, "checkpointed", checkpointed);
    return send(ev, &(struct dt_event){.type = DT_EV_PREEMPTED, .step = step});
}

dt_status_t dt_events_run_finished(struct dt_events *ev, int64_t steps, double loss, double val_loss, double seconds,
                                   int64_t tokens)
{
    head(ev, DT_EV_RUN_FINISHED);
    dt_json_int(&ev->json, "steps", steps);
    dt_json_int(&ev->json, "tokens", tokens);
    dt_json_num(&ev->json, "loss", loss);
    dt_json_num(&ev->json, "val_loss", val_loss);
    dt_json_num(&ev->json, "seconds", seconds);
    return send(ev, &(struct dt_event){.type = DT_EV_RUN_FINISHED, .step = steps});
}

dt_status_t dt_events_run_failed(struct dt_events *ev, int64_t step, const char *error)
{
    head(ev, DT_EV_RUN_FAILED);
    if (step >= 0) dt_json_int(&ev->json, "step", step);
    else dt_json_null(&ev->json, "step");
    dt_json_str(&ev->json, "error", error);
    return send(ev, &(struct dt_event){.type = DT_EV_RUN_FAILED, .step = step});
}
