/*
 * checkpoint.c - the trainer's checkpoints (trainer_impl.h): rank 0 chooses
 * what to resume from before anything is opened, every rank reads the ranges
 * it keeps, and a save copies this rank's state, writes it in the background
 * and is committed by rank 0 once every rank's file is down.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "comm/comm.h"
#include "config/schema.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/log.h"
#include "core/mem.h"
#include "events/jsonl.h"
#include "train/shapes.h"
#include "train/trainer_impl.h"

#define READ_CHUNK ((size_t)1 << 20) /* floats read at a time on resume */

void dt_train_ckpt_settings(struct trainer *tr)
{
    const struct dt_config *cfg = tr->cfg;
    if (cfg->checkpoint.dir[0] == '/') snprintf(tr->ckpt_dir, sizeof tr->ckpt_dir, "%s", cfg->checkpoint.dir);
    else snprintf(tr->ckpt_dir, sizeof tr->ckpt_dir, "%s/%s", cfg->run.dir, cfg->checkpoint.dir);
}

/* checkpoint.dir made and writable now, not at the first save an hour in */
static dt_status_t writable(const char *dir)
{
    if (dt_mkdirs(dir) != DT_SUCCESS) {
        char why[600];
        snprintf(why, sizeof why, "%s", dt_error_msg());
        return dt_error(DT_ERR_CKPT, "%s (checkpoint.dir)\n  hint: point checkpoint.dir elsewhere, or set it to null "
                        "to save no checkpoints", why);
    }
    if (access(dir, W_OK | X_OK) != 0)
        return dt_error(DT_ERR_CKPT, "%s: error: checkpoint.dir is not writable: %s\n  hint: make it writable, point "
                        "checkpoint.dir elsewhere, or set it to null to save no checkpoints", dir, strerror(errno));
    return DT_SUCCESS;
}

/* The checkpoints of another timeline (newer than the one this run goes on from, or any, for a
 * fresh start) are renamed out of auto-resume's way, never deleted. */
static void supersede(struct trainer *tr, const char *from)
{
    long long after = -1;
    struct dt_ckpt *c;
    if (from && dt_ckpt_open(from, false, &c) == DT_SUCCESS) {
        after = dt_ckpt_state(c)->step;
        dt_ckpt_close(c);
    }
    char names[1024];
    int n = dt_ckpt_supersede(tr->ckpt_dir, after, tr->tag, names, sizeof names);
    if (n > 0)
        DT_WARN("%s: %s renamed to *.superseded-%s: this run %s, so a later auto-resume must not take %s", tr->ckpt_dir,
                names, tr->tag, from ? "goes on from an older checkpoint" : "starts afresh", n == 1 ? "it" : "them");
}

/* How this run's config differs from the one whose hash a checkpoint holds, in out ("": it does not).
 * The keys that differ are named when run.dir's config.yaml, saved by the last start, is that config
 * (its hash says so); else the two hashes. */
static void config_diff(const struct trainer *tr, const char *was_hash, char *out, size_t n)
{
    char hash[80], path[4200];
    out[0] = '\0';
    dt_events_config_hash(tr->cfg, hash, sizeof hash);
    if (!strcmp(hash, was_hash)) return;
    snprintf(out, n, "its hash %s, now %s", was_hash, hash);
    snprintf(path, sizeof path, "%s/config.yaml", tr->cfg->run.dir);
    struct dt_config was;
    if (access(path, R_OK) != 0 || dt_config_init(&was) != DT_SUCCESS) return;
    char was_saved[80];
    if (dt_config_load(&was, NULL, path, 0, NULL) == DT_SUCCESS) {
        dt_events_config_hash(&was, was_saved, sizeof was_saved);
        if (!strcmp(was_saved, was_hash)) dt_events_config_diff(&was, tr->cfg, out, n);
    }
    dt_config_free(&was);
}
/* A checkpoint's model line against this run's: equal, or a Llama's line written before lines ended
 * in max_position (a number no computation reads: export's config.json says it) */
static bool same_model(const char *saved, const char *ours)
{
    if (!strcmp(saved, ours)) return true;
    const char *tail = strstr(ours, " max_position=");
    size_t n = tail ? (size_t)(tail - ours) : 0;
    return tail && strlen(saved) == n && !strncmp(saved, ours, n);
}


dt_status_t dt_train_ckpt_choose(struct trainer *tr, const char *shape)
{
    const struct dt_config *cfg = tr->cfg;
    char path[4096];
    bool found;
    DT_CHECK(writable(tr->ckpt_dir));
    /* run.dir's lock covers a checkpoint.dir under it; one elsewhere may be another run's */
    if (cfg->checkpoint.dir[0] == '/') DT_CHECK(dt_dirlock_take(&tr->ckpt_lock, tr->ckpt_dir, "checkpoint.dir"));
    DT_CHECK(dt_ckpt_find(tr->ckpt_dir, cfg->checkpoint.resume, path, sizeof path, &found));
    supersede(tr, found ? path : NULL);
    if (!found) return DT_SUCCESS;
    struct dt_ckpt *c;
    DT_CHECK(dt_ckpt_open(path, false, &c)); /* find checked every byte */
    const struct dt_run_state s = *dt_ckpt_state(c);
    dt_ckpt_close(c);
    const char *opt = dt_enum_str(dt_optim_names, cfg->optimizer.type);
    if (!same_model(s.model, shape))
        return dt_error(DT_ERR_CKPT, "%s: error: this checkpoint holds a model of another shape (%s); this config "
                        "builds %s\n  hint: resume it with the model it was written by, or start afresh: "
                        "checkpoint.resume: none (or another checkpoint.dir)", path, s.model, shape);
    if (strcmp(s.optimizer, opt))
        return dt_error(DT_ERR_CKPT, "%s: error: this checkpoint holds %s state; this config's optimizer is %s\n"
                        "  hint: resume with optimizer.type: %s, or start afresh: checkpoint.resume: none", path,
                        s.optimizer, opt, s.optimizer);
    config_diff(tr, s.config_hash, tr->config_diff, sizeof tr->config_diff);
    if (tr->config_diff[0])
        DT_INFO(DT_SUB_TRAIN, "resuming with a config other than the one that wrote %s: %s", path, tr->config_diff);
    snprintf(tr->resumed, sizeof tr->resumed, "%s", path);
    tr->resumed_step = s.step;
    struct dt_run_state *st = &tr->state;
    st->step = s.step;
    st->opt_steps = s.opt_steps;
    st->samples = s.samples;
    st->tokens = s.tokens;
    st->loss = s.loss;
    st->val_loss = s.val_loss;
    snprintf(st->run_id, sizeof st->run_id, "%s", s.run_id);
    /* the scaler's settings stay the config's; its counters are the run's */
    st->scaler.scale = s.scaler.scale;
    st->scaler.cur_hysteresis = s.scaler.cur_hysteresis;
    st->scaler.cur_iter = s.scaler.cur_iter;
    st->scaler.last_overflow_iter = s.scaler.last_overflow_iter;
    st->scaler.skipped = s.scaler.skipped;
    DT_INFO(DT_SUB_TRAIN, "resuming from %s: step %lld, %lld samples, written by %s on %d rank%s", path,
            (long long)s.step, (long long)s.samples, s.strategy, s.world, s.world == 1 ? "" : "s");
    return DT_SUCCESS;
}

/* fp8-mixed's scales and histories as the checkpoint left them (the same bits: the run goes on
 * exactly); a checkpoint of another precision, or of another history length, gives what it can */
static dt_status_t load_fp8(struct trainer *tr, const struct dt_ckpt *c)
{
    const struct dt_run_state *s = dt_ckpt_state(c);
    struct dt_fp8_state *f = &tr->fp8;
    if (!tr->prec.fp8 || !s->fp8_tensors) {
        if (tr->rank == 0 && (tr->prec.fp8 || s->fp8_tensors))
            DT_INFO(DT_SUB_TRAIN, "%s: %s; fp8-mixed's scales start afresh (1, empty histories)", tr->resumed,
                    tr->prec.fp8 ? "saved without fp8-mixed's state" : "its fp8 scales are not used by this precision");
        return DT_SUCCESS;
    }
    if (s->fp8_tensors != f->n)
        return dt_error(DT_ERR_CKPT, "%s: error: fp8 state for %d tensors, this model quantises %d\n  hint: resume "
                        "with the model that wrote it", tr->resumed, s->fp8_tensors, f->n);
    size_t saved = (size_t)s->fp8_tensors * (1 + (size_t)s->fp8_history);
    float *host = malloc(saved * sizeof(float));
    if (!host) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory resuming fp8-mixed's state");
    dt_status_t rc = dt_ckpt_read_extra(c, "fp8.bin", host, saved * sizeof(float), s->fp8_xxh64);
    if (rc == DT_SUCCESS && s->fp8_history == f->len) dt_fp8_restore(f, host);
    else if (rc == DT_SUCCESS) { /* the scales go on; the histories start empty */
        f->k->copy(f->kc, f->scale, host, (size_t)f->n * sizeof(float), DT_COPY_TO_DEVICE);
        if (tr->rank == 0)
            DT_INFO(DT_SUB_TRAIN, "%s: fp8 amax histories of %d steps, compute.fp8.amax_history_len is %d here: the "
                    "scales go on, the histories start empty", tr->resumed, s->fp8_history, f->len);
    }
    free(host);
    return rc;
}

dt_status_t dt_train_ckpt_load(struct trainer *tr)
{
    if (!tr->resumed[0]) return DT_SUCCESS;
    struct dt_engine *e = tr->strategy->engine;
    struct dt_ckpt *c = NULL;
    int narrays = dt_engine_narrays(e), nr = dt_engine_load_ranges(e, NULL, 0);
    /* a failure is kept, not returned: every rank goes on to the collective below */
    dt_status_t rc = dt_ckpt_open(tr->resumed, false, &c);
    if (rc == DT_SUCCESS && dt_ckpt_state(c)->narrays != narrays)
        rc = dt_error(DT_ERR_CKPT, "%s: error: %d arrays per parameter, the optimizer here keeps %d\n  hint: resume "
                      "with the optimizer settings that wrote it", tr->resumed, dt_ckpt_state(c)->narrays, narrays);
    struct dt_range *r = malloc((size_t)(nr ? nr : 1) * sizeof *r);
    float *buf = tr->k->host_alloc(tr->kc, READ_CHUNK * sizeof(float));
    if (rc == DT_SUCCESS && (!r || !buf))
        rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory resuming from %s", tr->resumed);
    if (rc == DT_SUCCESS) dt_engine_load_ranges(e, r, nr);
    for (int a = 0; rc == DT_SUCCESS && a < narrays; a++)
        for (int i = 0; rc == DT_SUCCESS && i < nr; i++)
            for (size_t done = 0; rc == DT_SUCCESS && done < r[i].n; done += READ_CHUNK) {
                size_t k = r[i].n - done < READ_CHUNK ? r[i].n - done : READ_CHUNK;
                rc = dt_ckpt_read(c, a, r[i].off + done, k, buf);
                if (rc == DT_SUCCESS) dt_engine_put(e, a, r[i].off + done, k, buf);
            }
    free(r);
    if (buf) tr->k->host_free(tr->kc, buf);
    if (rc == DT_SUCCESS) rc = load_fp8(tr, c);
    dt_ckpt_close(c);
    dt_status_t done = dt_engine_loaded(e, tr->state.opt_steps); /* collective */
    DT_CHECK(rc);
    return done;
}

static void *stage_alloc(void *ctx, size_t bytes)
{
    const struct trainer *tr = ctx;
    return tr->k->host_alloc(tr->kc, bytes);
}
static void stage_free(void *ctx, void *p)
{
    const struct trainer *tr = ctx;
    tr->k->host_free(tr->kc, p);
}

dt_status_t dt_train_ckpt_prepare(struct trainer *tr, size_t *bytes)
{
    struct dt_engine *e = tr->strategy->engine;
    *bytes = 0;
    if (!tr->ckpt_dir[0]) return DT_SUCCESS;
    /* staged in the memory the backend copies fastest into (a GPU's: page-locked) */
    struct dt_host_mem mem = {stage_alloc, stage_free, tr};
    DT_CHECK(dt_ckpt_writer_open(tr->ckpt_dir, tr->rank, tr->world, &mem, &tr->writer));
    tr->reports = calloc((size_t)tr->world, sizeof *tr->reports);
    tr->files = calloc((size_t)tr->world, sizeof *tr->files);
    if (!tr->reports || !tr->files) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    int n = dt_engine_save_ranges(e, NULL, 0);
    struct dt_range *r = malloc((size_t)(n ? n : 1) * sizeof *r);
    if (!r) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    dt_engine_save_ranges(e, r, n);
    size_t elems = 0;
    for (int i = 0; i < n; i++) elems += r[i].n;
    dt_status_t rc = dt_ckpt_writer_reserve(tr->writer, r, n, dt_engine_narrays(e));
    free(r);
    *bytes = elems * (size_t)dt_engine_narrays(e) * sizeof(float);
    return rc;
}

static dt_status_t get(void *ctx, int array, size_t off, size_t n, float *dst)
{
    dt_engine_get(ctx, array, off, n, dst);
    return DT_SUCCESS;
}

/* What the manifest says besides the counters. */
static void describe(struct trainer *tr, struct dt_run_state *s)
{
    const struct dt_config *cfg = tr->cfg;
    struct dt_engine *e = tr->strategy->engine;
    s->opt_steps = dt_engine_opt_steps(e);
    s->seed = (uint64_t)cfg->run.seed;
    dt_events_config_hash(cfg, s->config_hash, sizeof s->config_hash);
    dt_shapes_describe(cfg, s->model, sizeof s->model);
    s->nparams = (int64_t)tr->model->nparams;
    snprintf(s->optimizer, sizeof s->optimizer, "%s", dt_enum_str(dt_optim_names, cfg->optimizer.type));
    s->narrays = dt_engine_narrays(e);
    snprintf(s->strategy, sizeof s->strategy, "%s", tr->strategy->name);
    snprintf(s->precision, sizeof s->precision, "%s", tr->prec.name);
    s->stage = tr->strategy->ec.stage;
    s->world = tr->world;
    s->restart = tr->strategy->w->restarts;
    dt_events_iso_now(s->saved_at, sizeof s->saved_at);
    if (tr->prec.fp8) { /* taken now, at the step boundary; written by rank 0 at the commit */
        s->fp8_tensors = tr->fp8.n;
        s->fp8_history = tr->fp8.len;
        dt_fp8_save(&tr->fp8, tr->fp8_pending);
        s->fp8_xxh64 = dt_xxh64(tr->fp8_pending, dt_fp8_floats(&tr->fp8) * sizeof(float), 0);
    }
}

void dt_train_ckpt_begin(struct trainer *tr)
{
    struct dt_engine *e = tr->strategy->engine;
    tr->pending = true;
    tr->pending_state = tr->state;
    describe(tr, &tr->pending_state);
    tr->last_save = dt_now();
    dt_status_t rc = DT_SUCCESS;
    int n = dt_engine_save_ranges(e, NULL, 0);
    struct dt_range *r = malloc((size_t)(n ? n : 1) * sizeof *r);
    if (rc == DT_SUCCESS && !r) rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory saving a checkpoint");
    if (rc == DT_SUCCESS) {
        dt_engine_save_ranges(e, r, n);
        rc = dt_ckpt_begin(tr->writer, tr->state.step, tr->tag, r, n, dt_engine_narrays(e), get, e);
    }
    free(r);
    tr->began = rc == DT_SUCCESS;
    if (!tr->began) snprintf(tr->begin_error, sizeof tr->begin_error, "%s", dt_error_msg());
}

/* Until no rank's file is still being written: a short all-reduce at a time, so that a rank waiting
 * for a slow writer elsewhere never sits in one collective longer than its watchdog allows. */
static dt_status_t await_writers(struct trainer *tr)
{
    struct dt_comm *comm = tr->strategy->comm;
    for (;;) {
        double busy = tr->began && dt_ckpt_busy(tr->writer);
        if (comm) DT_CHECK(dt_comm_do(comm, dt_coll_allreduce(&busy, 1, DT_F64, DT_RED_MAX, "checkpoint writers")));
        if (busy == 0) return DT_SUCCESS;
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
}

dt_status_t dt_train_ckpt_finish(struct trainer *tr, bool fatal)
{
    struct dt_comm *comm = tr->strategy->comm;
    struct dt_ckpt_report mine = {.ok = 1};
    if (dt_fault_hit(DT_FAULT_STALL_SAVE, tr->pending_state.step, tr->rank)) dt_fault_stall_forever();
    DT_CHECK(await_writers(tr));
    dt_status_t rc = DT_SUCCESS;
    if (!tr->began) {
        mine.ok = 0;
        snprintf(mine.error, sizeof mine.error, "%s", tr->begin_error);
    } else if ((rc = dt_ckpt_wait(tr->writer, &mine.file, &mine.seconds)) != DT_SUCCESS) {
        mine.ok = 0;
        snprintf(mine.error, sizeof mine.error, "%s", dt_error_msg());
    }
    tr->pending = false;
    struct dt_ckpt_report *all = tr->reports;
    all[tr->rank] = mine;
    if (comm)
        rc = dt_comm_do(comm, dt_coll_allgather(&mine, all, (size_t)tr->world * sizeof mine, DT_U8,
                                                "checkpoint file list"));
    if (rc != DT_SUCCESS && mine.ok) return rc;
    const struct dt_run_state *s = &tr->pending_state;
    char path[4400], why[1024] = "";
    snprintf(path, sizeof path, "%s/step-%08lld", tr->ckpt_dir, (long long)s->step);
    int32_t status = 1;
    if (tr->rank == 0) {
        struct dt_ckpt_file *files = tr->files;
        int64_t bytes = 0;
        double secs = 0;
        for (int i = 0; i < tr->world && status; i++)
            if (!all[i].ok) {
                status = 0;
                snprintf(why, sizeof why, "rank %d: %s", i, all[i].error);
            }
        for (int i = 0; i < tr->world; i++) {
            files[i] = all[i].file;
            bytes += all[i].file.bytes;
            if (all[i].seconds > secs) secs = all[i].seconds;
        }
        double t0 = dt_now();
        if (status && s->fp8_tensors &&
            dt_ckpt_write_extra(tr->ckpt_dir, s->step, tr->tag, "fp8.bin", tr->fp8_pending,
                                dt_fp8_floats(&tr->fp8) * sizeof(float)) != DT_SUCCESS) {
            status = 0;
            snprintf(why, sizeof why, "rank 0: %s", dt_error_msg());
        }
        if (status &&
            dt_ckpt_commit(tr->ckpt_dir, tr->tag, s, files, tr->world, (int)tr->cfg->checkpoint.keep, tr->resumed,
                           path, sizeof path) != DT_SUCCESS) {
            status = 0;
            snprintf(why, sizeof why, "rank 0: %s", dt_error_msg());
        }
        secs += dt_now() - t0;
        if (status) {
            DT_INFO(DT_SUB_TRAIN, "checkpoint saved: %s (%.1f MiB in %.2f s, %.0f MB/s)", path, bytes / 1048576.0,
                    secs, secs > 0 ? bytes / secs / 1e6 : 0.0);
            dt_events_checkpoint_saved(&tr->events, s->step, path, bytes, secs);
        } else {
            if (!fatal) DT_WARN("checkpoint of step %lld failed, %s", (long long)s->step, why); /* else the error says it */
            dt_events_checkpoint_failed(&tr->events, s->step, path, why);
        }
    }
    if (comm) DT_CHECK(dt_comm_do(comm, dt_coll_broadcast(&status, 1, DT_I32, 0, "checkpoint verdict")));
    if (status) return DT_SUCCESS;
    if (tr->rank == 0)
        return dt_error(DT_ERR_CKPT, "dtrun: error: checkpoint of step %lld failed, %s", (long long)s->step, why);
    return dt_error(DT_ERR_CKPT, "dtrun: rank %d: error: the checkpoint of step %lld failed; rank 0 says why",
                    tr->rank, (long long)s->step);
}
