/* trainer.c - see trainer.h. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "core/clock.h"
#include "comm/comm.h"
#include "core/dirlock.h"
#include "core/error.h"
#include "core/fault.h"
#include "config/schema.h"
#include "core/log.h"
#include "data/loader.h"
#include "config/emit.h"
#include "events/events.h"
#include "events/jsonl.h"
#include "model/gpt.h"
#include "model/mlp.h"
#include "optim/optimizer.h"
#include "kernels/backend.h"
#include "kernels/profile.h"
#include "launch/launch.h"
#include "optim/sched.h"
#include "precision/policy.h"
#include "ckpt/hf.h"
#include "strategy/strategy.h"
#include "train/breakdown.h"
#include "train/peak.h"
#include "train/shapes.h"
#include "train/signals.h"
#include "train/trainer_impl.h"

/* What this build can run; the rest of the config is valid, just not here yet. */
static dt_status_t supported(const struct dt_config *cfg)
{
    if (cfg->model.init_from && cfg->model.type == DT_MODEL_MLP)
        return dt_error(DT_ERR_CONFIG, "dtrun: error: model.init_from loads llm.c GPT weights; an mlp has none\n"
                        "  hint: remove model.init_from");
    return DT_SUCCESS;
}

/* Settings that weaken the run: said once. */
static void warn_risky(const struct dt_config *cfg)
{
    if (cfg->events.webhook.url && cfg->events.webhook.insecure)
        DT_WARN("events.webhook.insecure is true: the webhook's TLS certificate is not verified, so anyone on the path "
                "can read or forge what is sent");
}

/* What rank 0 decides for every rank before anything is opened. */
struct start {
    char run_id[40]; /* "": rank 0 failed, its message says why */
    char tag[24];
    char resumed[4096];
    int64_t resumed_step;
    struct dt_run_state state;
};

/* Rank 0 takes run.dir for this run (dirlock.h), chooses the checkpoint to resume from and so the
 * run id (a resumed run keeps its own); every rank receives the decision, an empty run id when rank
 * 0 failed, so no rank writes into a directory another run holds. */
static dt_status_t claim_run_dir(struct trainer *tr)
{
    struct dt_strat *st = tr->strategy;
    const char *dir = tr->cfg->run.dir;
    struct start *s = calloc(1, sizeof *s);
    if (!s) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    dt_status_t rc = DT_SUCCESS;
    if (st->rank == 0) {
        char shape[192], fresh[40];
        dt_shapes_describe(tr->cfg, shape, sizeof shape);
        dt_events_new_run_id(fresh);
        snprintf(tr->tag, sizeof tr->tag, "%.8s", fresh); /* this start's: its partial saves */
        rc = dt_mkdirs(dir);
        if (rc == DT_SUCCESS) rc = dt_dirlock_take(&tr->lock, dir, "run.dir");
        if (rc == DT_SUCCESS && tr->ckpt_dir[0]) rc = dt_train_ckpt_choose(tr, shape);
        if (rc == DT_SUCCESS) {
            if (!tr->state.run_id[0]) snprintf(tr->state.run_id, sizeof tr->state.run_id, "%s", fresh);
            s->state = tr->state;
            s->resumed_step = tr->resumed_step;
            snprintf(s->run_id, sizeof s->run_id, "%s", tr->state.run_id);
            snprintf(s->resumed, sizeof s->resumed, "%s", tr->resumed);
            snprintf(s->tag, sizeof s->tag, "%s", tr->tag);
        }
    }
    dt_status_t sent = st->comm ? dt_comm_do(st->comm, dt_coll_broadcast(s, sizeof *s, DT_U8, 0, "run start"))
                                : DT_SUCCESS;
    if (rc == DT_SUCCESS && sent == DT_SUCCESS && s->run_id[0]) {
        tr->state = s->state;
        snprintf(tr->tag, sizeof tr->tag, "%s", s->tag);
        snprintf(tr->resumed, sizeof tr->resumed, "%s", s->resumed);
        tr->resumed_step = s->resumed_step;
    }
    bool ok = s->run_id[0];
    free(s);
    DT_CHECK(rc); /* rank 0's own message */
    DT_CHECK(sent);
    if (!ok)
        return dt_error(DT_ERR_CONFIG, "dtrun: rank %d: error: rank 0 could not take run.dir %s or its checkpoint; "
                        "its message says why", st->rank, dir);
    return DT_SUCCESS;
}

/* run.dir/config.yaml: the resolved config as `dtrun check` prints it (credentials masked), so the
 * run can be repeated and `dtrun events flush` knows where its events go. */
static dt_status_t save_config(const struct dt_config *cfg)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.yaml", cfg->run.dir); /* claim_run_dir made the directory */
    FILE *f = fopen(path, "w");
    if (!f) return dt_error(DT_ERR_SYSTEM, "%s: error: cannot write the run's config: %s\n  hint: is run.dir writable?",
                            path, strerror(errno));
    dt_config_emit(cfg, f);
    if (fclose(f) != 0) return dt_error(DT_ERR_SYSTEM, "%s: error: writing the run's config failed: %s", path,
                                        strerror(errno));
    return DT_SUCCESS;
}

/* what DTRUN_FAULT=hog takes (fault.h) */
#define HOG_BYTES ((size_t)256 << 20)
/* host memory a rank's initial parameters pass through, at most (64 MiB) */
#define PARAM_STAGING ((size_t)16 << 20)

/* The parameters a run starts from, on each rank only the ranges it keeps: the model's random init
 * or model.init_from's file, read from the bytes that hold those ranges. */
static dt_status_t initial_params(struct trainer *tr)
{
    const struct dt_config *cfg = tr->cfg;
    const char *from = cfg->model.init_from;
    struct dt_param_source src;
    dt_status_t rc = DT_SUCCESS;
    if (!from) dt_model_init_source(tr->model, (uint64_t)cfg->run.seed, &src);
    else if (cfg->model.type == DT_MODEL_LLAMA) rc = dt_hf_llama_source(tr->model, from, &src);
    else rc = dt_gpt_llmc_source(tr->model, from, &src);
    if (rc == DT_SUCCESS && !src.ctx) rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory opening %s", src.what);
    /* a rank that could not open it still takes part in the fill's collective */
    dt_status_t filled = dt_engine_fill(tr->strategy->engine, rc == DT_SUCCESS ? &src : NULL, PARAM_STAGING);
    double read[2] = {(double)src.bytes_read, (double)src.bytes_read};
    if (rc == DT_SUCCESS) dt_source_close(&src);
    DT_CHECK(rc);
    DT_CHECK(filled);
    if (!from) return DT_SUCCESS;
    DT_CHECK(dt_strategy_mean(tr->strategy, read, 1));
    DT_CHECK(dt_strategy_max(tr->strategy, read + 1, 1));
    if (tr->rank == 0)
        DT_INFO(DT_SUB_TRAIN, "model.init_from %s: each rank read the slices it keeps, %.1f MiB on average, %.1f MiB "
                "at most, of %.1f MiB of parameters in fp32", from, read[0] / 1048576, read[1] / 1048576,
                (double)tr->model->nparams * 4 / 1048576);
    return DT_SUCCESS;
}

static dt_status_t setup(struct trainer *tr, const struct dt_config *cfg, const struct dt_world *w)
{
    tr->cfg = cfg;
    if (w->size != cfg->resolved.world)
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: the config resolved %d ranks but %d were started",
                        cfg->resolved.world, w->size);
    tr->rank = w->rank;
    tr->world = w->size;
    DT_CHECK(dt_precision_from_config(cfg, &tr->prec));
    /* refused before anything is allocated when the node cannot hold what its ranks will */
    DT_CHECK(dt_memory_plan(cfg, &tr->plan));
    DT_CHECK(dt_memory_check_node(cfg, &tr->plan));
    dt_loss_scaler_init(&tr->state.scaler, &tr->prec.scaler);
    tr->state.val_loss = NAN;
    tr->state.loss = NAN;
    dt_log_set_rank(w->rank, w->size);
    DT_CHECK(dt_strategy_create(cfg, &tr->prec, w, &tr->strategy));
    if (cfg->checkpoint.dir) dt_train_ckpt_settings(tr);
    DT_CHECK(claim_run_dir(tr));
    if (w->rank == 0) DT_CHECK(save_config(cfg));
    DT_CHECK(dt_events_open(&tr->events, cfg, w, tr->state.run_id));
    tr->events_open = true;
    tr->step = -1;
    bool mlp = cfg->model.type == DT_MODEL_MLP;
    tr->B = (int)cfg->data.micro_batch_size;
    tr->T = mlp ? 1 : (int)cfg->model.seq_len; /* an MLP's "tokens" are its samples */
    tr->gas = (int)cfg->compute.gradient_accumulation_steps;
    if (tr->k->init) tr->k->init();
    DT_CHECK(tr->k->ctx_create(tr->device, &tr->kc));
    if (cfg->events.wall_clock_breakdown) {
        DT_CHECK(dt_kprofile_wrap(&tr->k, &tr->kc));
        dt_kprofile_pause(tr->kc, true); /* the setup's ops (the parameters' fill, a resume's load) are no step's */
    }
    DT_CHECK(dt_dataset_open(&tr->train, cfg, false));
    if (cfg->data.val || !cfg->data.train) DT_CHECK(dt_dataset_open(&tr->val, cfg, true));

    struct dt_step_units u = {.samples_per_step = cfg->resolved.global_batch,
                              .tokens_per_step = cfg->resolved.global_batch * tr->T};
    u.steps_per_epoch = (int64_t)dt_dataset_windows(&tr->train) / cfg->resolved.global_batch;
    tr->steps_per_epoch = tr->train.synthetic ? 0 : u.steps_per_epoch;
    if (!tr->train.synthetic && u.steps_per_epoch == 0)
        return dt_error(DT_ERR_DATA, "data.train: error: %zu sequences, fewer than one global batch of %lld\n"
                        "  hint: lower data.micro_batch_size or gradient_accumulation_steps, or add data",
                        dt_dataset_windows(&tr->train), (long long)cfg->resolved.global_batch);
    tr->steps = dt_duration_steps(cfg->run.max_duration, &u, 0);
    tr->eval_every = dt_duration_steps(cfg->run.eval_interval, &u, tr->steps);
    tr->sample_every = dt_duration_steps(cfg->events.sample_interval, &u, tr->steps);
    tr->log_every = dt_duration_steps(cfg->events.interval, &u, tr->steps);
    if (tr->log_every < 1) tr->log_every = 1;
    dt_sched_from_config(&tr->sched, cfg, &u, tr->steps);
    if (cfg->checkpoint.interval.unit == DT_TU_SEC) tr->ckpt_secs = cfg->checkpoint.interval.value;
    else tr->ckpt_every = dt_duration_steps(cfg->checkpoint.interval, &u, tr->steps);

    if (mlp) {
        struct dt_mlp_config mc;
        dt_shapes_mlp(cfg, &mc);
        mc.activations = tr->prec.compute;
        DT_CHECK(dt_mlp_create(&mc, tr->k, tr->kc, tr->B, &tr->model));
        tr->x = malloc((size_t)tr->B * mc.in * sizeof(float));
        tr->y = malloc((size_t)tr->B * mc.out * sizeof(float));
        tr->labels = malloc((size_t)tr->B * sizeof(int32_t));
        if (!tr->x || !tr->y || !tr->labels) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the batch");
    } else if (cfg->model.type == DT_MODEL_LLAMA) {
        struct dt_llama_config lc;
        dt_shapes_llama(cfg, tr->prec.compute, &lc);
        DT_CHECK(dt_llama_create(&lc, tr->k, tr->kc, tr->B, tr->T, &tr->model));
    } else {
        struct dt_gpt_config gc;
        dt_shapes_gpt(cfg, tr->prec.compute, &gc);
        DT_CHECK(dt_gpt_create(&gc, tr->k, tr->kc, tr->B, tr->T, &tr->model));
    }
    if (tr->prec.fp8) {
        DT_CHECK(dt_fp8_open(&tr->fp8, &tr->prec.fp8r, tr->model->n_linear, tr->k, tr->kc));
        tr->model->fp8 = &tr->fp8.meta;
        tr->fp8_pending = malloc(dt_fp8_floats(&tr->fp8) * sizeof(float));
        if (!tr->fp8_pending) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for fp8-mixed's state");
    }
    tr->loss_acc = tr->k->alloc(tr->kc, sizeof *tr->loss_acc);
    if (!tr->loss_acc)
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the loss (%zu bytes): the model filled the "
                        "device\n  hint: lower data.micro_batch_size or enable model.activation_checkpointing",
                        sizeof *tr->loss_acc);
    struct dt_optim_config oc;
    dt_shapes_optim(cfg, &oc);
    DT_CHECK(dt_strategy_attach(tr->strategy, tr->model, &oc));
    if (!tr->resumed[0]) DT_CHECK(initial_params(tr));
    DT_CHECK(dt_train_ckpt_load(tr));
    DT_CHECK(dt_train_ckpt_prepare(tr, &tr->ckpt_bytes));
    DT_CHECK(dt_train_samples_open(tr));
    tr->tokens = malloc((size_t)tr->B * (tr->T + 1) * sizeof(int32_t)); /* GPT; small for an MLP */
    if (!tr->tokens) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the batch");
    return DT_SUCCESS;
}

static void teardown(struct trainer *tr, bool clean)
{
    dt_ckpt_writer_close(tr->writer); /* waits for a file still being written */
    free(tr->reports);
    free(tr->files);
    dt_dirlock_release(&tr->ckpt_lock);
    dt_strategy_free(tr->strategy, clean);
    dt_model_free(tr->model);
    if (tr->loss_acc) tr->k->free(tr->kc, tr->loss_acc);
    dt_fp8_close(&tr->fp8);
    free(tr->fp8_pending);
    if (tr->kc) tr->k->ctx_destroy(tr->kc);
    dt_dataset_close(&tr->train);
    dt_dataset_close(&tr->val);
    if (tr->events_open) dt_events_close(&tr->events);
    dt_dirlock_release(&tr->lock); /* after the events: their spool lives in run.dir */
    dt_train_samples_close(tr);
    free(tr->tokens);
    free(tr->hog);
    free(tr->labels);
    free(tr->x);
    free(tr->y);
}

/* Micro-batch of samples first .. first+B-1 from d, in the form the model reads. */
static struct dt_batch fill(struct trainer *tr, struct dt_dataset *d, int64_t first)
{
    struct dt_batch b = {.B = tr->B, .T = tr->T};
    if (d->features) {
        dt_dataset_features(d, first, tr->B, tr->x, tr->labels, tr->y);
        b.x = tr->x;
        b.labels = tr->labels;
        b.y = tr->y;
    } else {
        dt_dataset_batch(d, first, tr->B, tr->tokens);
        b.tokens = tr->tokens;
    }
    return b;
}

static dt_status_t evaluate(struct trainer *tr, double *out)
{
    const struct dt_config *cfg = tr->cfg;
    double sum = 0;
    int n = (int)cfg->data.eval_batches;
    if (!tr->val.synthetic) {
        int64_t max = (int64_t)dt_dataset_windows(&tr->val) / ((int64_t)tr->B * tr->world);
        if (n > max) n = (int)max;
    }
    if (tr->model->fp8) tr->model->fp8 = &tr->fp8.quiet; /* validation leaves the amaxes as training made them */
    struct dt_loss_sink sink = {tr->loss_acc, 1.0};
    tr->k->zero(tr->kc, tr->loss_acc, sizeof *tr->loss_acc);
    for (int i = 0; i < n; i++) {
        struct dt_batch b = fill(tr, &tr->val, ((int64_t)i * tr->world + tr->rank) * tr->B);
        tr->model->iface.forward(tr->model, &b, 0.0f, &sink);
    }
    tr->k->copy(tr->kc, &sum, tr->loss_acc, sizeof sum, DT_COPY_TO_HOST);
    if (tr->model->fp8) tr->model->fp8 = &tr->fp8.meta;
    *out = n ? sum / n : NAN;
    return dt_strategy_mean(tr->strategy, out, 1);
}

/* Said once per change of the scaler, never once per skipped step (REFERENCE.md problems 28-30). */
static void report_scale(const struct trainer *tr, int64_t step, enum dt_scale_event ev, double before)
{
    const struct dt_loss_scaler *s = &tr->state.scaler;
    if (ev == DT_SCALE_CREDIT_USED)
        DT_INFO(DT_SUB_TRAIN, "step %lld: fp16 gradients overflowed; step skipped, loss scale kept at %g (hysteresis "
                "left %lld of %lld; %lld skipped so far)", (long long)step + 1, s->scale, (long long)s->cur_hysteresis,
                (long long)s->delayed_shift, (long long)s->skipped);
    else if (ev == DT_SCALE_REDUCED)
        DT_INFO(DT_SUB_TRAIN, "step %lld: fp16 gradients overflowed; step skipped, loss scale %g -> %g (%lld skipped "
                "so far)", (long long)step + 1, before, s->scale, (long long)s->skipped);
    else if (ev == DT_SCALE_GREW)
        DT_DEBUG(DT_SUB_TRAIN, "step %lld: loss scale %g -> %g after %lld clean steps", (long long)step + 1, before,
                 s->scale, (long long)s->window);
}

/* Unscale, decide overflow for every rank at once (with the norm: one all-reduce), clip, step; an
 * overflowing step leaves the parameters and the LR schedule where they were. norm is NaN for a
 * skipped step. */
static dt_status_t apply_step(struct trainer *tr, int64_t step, float *norm, double *lr)
{
    struct dt_engine *e = tr->strategy->engine;
    double scale = tr->state.scaler.scale, sumsq;
    bool nonfinite;
    if (dt_fault_hit(DT_FAULT_GRAD_INF, step + 1, tr->rank)) dt_engine_poison_grad(e);
    DT_CHECK(dt_engine_grad_norm(e, &sumsq, &nonfinite));
    bool overflow = tr->prec.scaled && nonfinite;
    enum dt_scale_event ev;
    DT_CHECK(dt_loss_scaler_update(&tr->state.scaler, overflow, step, &ev));
    report_scale(tr, step, ev, scale);
    *lr = dt_sched_lr(&tr->sched, dt_engine_opt_steps(e)); /* the one step counter: the optimizer's */
    *norm = NAN;
    if (overflow) return DT_SUCCESS;
    /* torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6) when that is below 1 */
    float clip = (float)tr->cfg->compute.gradient_clipping;
    *norm = (float)(sqrt(sumsq) / scale);
    float f = clip > 0 && clip / (*norm + 1e-6f) < 1.0f ? clip / (*norm + 1e-6f) : 1.0f;
    return dt_engine_step(e, (float)*lr, f / (float)scale);
}

/* fp8-mixed, delayed scaling: the step's amaxes, the largest over the ranks, roll into the histories
 * and the scales follow (on the device) */
static dt_status_t fp8_step(struct trainer *tr)
{
    size_t n;
    float *amax = dt_fp8_amax(&tr->fp8, &n);
    if (!n) return DT_SUCCESS;
    struct dt_comm *comm = tr->strategy->comm;
    if (comm) DT_CHECK(dt_comm_do(comm, dt_coll_allreduce(amax, n, DT_F32, DT_RED_MAX, "fp8 amaxes")));
    dt_fp8_update(&tr->fp8);
    return DT_SUCCESS;
}

/* fp8-mixed: tensors whose amax overflowed their scale since the last record (twice the format's range
 * or more: delayed scaling meeting a jump; kernels.h, fp8_update); their largest values were clipped,
 * the scales have already come down for the next step, as Transformer Engine's do, and the log says
 * so once per record that saw it */
static void fp8_clipped(struct trainer *tr, int64_t step)
{
    if (!tr->fp8.hist) return;
    int64_t k = dt_fp8_take_saturated(&tr->fp8);
    if (!k) return;
    tr->fp8_overflows += k;
    if (tr->rank == 0)
        DT_WARN("step %lld: fp8: %lld tensor(s) overflowed their scale since the last record (an amax twice the "
                "range or more: values clipped at the format's largest, 448 for E4M3, 57344 for E5M2); the scales "
                "came down from the new amaxes for the steps that follow (%lld overflows so far)\n  hint: if it "
                "repeats, raise compute.fp8.margin or use compute.fp8.scaling: current", (long long)step + 1,
                (long long)k, (long long)tr->fp8_overflows);
}

/* The metrics record of the steps since the last one: the loss of this step (already the mean
 * over ranks), throughput over the interval, the slowest rank's step time and largest memory. */
static dt_status_t report(struct trainer *tr, int64_t step, double loss, double lr, float norm, double scale,
                          double interval_s, int64_t interval_steps, double elapsed, int64_t steps_run)
{
    const struct dt_config *cfg = tr->cfg;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double slowest[2] = {interval_s / (double)interval_steps * 1e3, (double)ru.ru_maxrss * 1024};
    DT_CHECK(dt_strategy_max(tr->strategy, slowest, 2));
    double op_ms[DT_KPROFILE_MAX];
    bool ops = cfg->events.wall_clock_breakdown;
    /* the run's first step reported alone is its warm-up (page faults, oneDNN's JIT): not in the
     * end-of-run table */
    bool warmup = step + 1 == interval_steps && interval_steps == 1 && tr->steps > 1;
    if (ops) dt_breakdown_interval(tr->kc, interval_steps, op_ms, !warmup);
    fp8_clipped(tr, step);
    if (!warmup) {
        tr->train_s += interval_s;
        tr->train_steps += interval_steps;
    }
    if (tr->rank != 0) return DT_SUCCESS;
    double samples_per_step = (double)cfg->resolved.global_batch, per = 1e3 / (double)interval_steps;
    struct dt_metrics m = {
        .step = step + 1, .steps = tr->steps, .epoch = tr->steps_per_epoch ? step / tr->steps_per_epoch : 0,
        .tokens = tr->state.tokens, .samples = tr->state.samples, .skipped_steps = tr->state.scaler.skipped,
        .fp8 = tr->prec.fp8, .fp8_overflows = tr->fp8_overflows,
        .loss = loss, .lr = lr, .grad_norm = norm, .loss_scale = scale,
        .tokens_per_s = interval_steps * samples_per_step * tr->T / interval_s,
        .samples_per_s = interval_steps * samples_per_step / interval_s,
        .eta_s = elapsed / (double)steps_run * (double)(tr->steps - step - 1),
        .step_ms = slowest[0], .peak_memory_bytes = (int64_t)slowest[1],
        .breakdown = cfg->events.wall_clock_breakdown, .forward_ms = tr->t_forward * per,
        .backward_ms = tr->t_backward * per, .comm_ms = tr->t_comm * per, .optimizer_ms = tr->t_optimizer * per};
    if (ops) {
        const struct dt_kprofile *p = dt_kprofile_of(tr->kc);
        m.nops = p->n;
        m.op_names = p->name;
        m.op_ms = op_ms;
    }
    if (tr->k->device_memory) {
        m.device_memory = true;
        tr->k->device_memory(tr->kc, &m.device_peak_allocated_bytes, &m.device_reserved_bytes);
    }
    m.mfu = tr->peak_tflops > 0 ? tr->model->flops_per_token * m.tokens_per_s / (tr->peak_tflops * 1e12 * tr->world)
                                : NAN;
    return dt_events_metrics(&tr->events, &m);
}

/* One step's forward and backward over every micro-batch; the local mean loss. The samples are the
 * global batch from the sampler's position on, each rank its share of each micro-batch. The loss is
 * summed where the kernels run and read once, after the last backward is queued: a GPU goes from
 * forward into backward without waiting for the host. (With events.wall_clock_breakdown every op
 * waits for its kernels, so the forward and backward times stay the GPU's.) */
static double forward_backward(struct trainer *tr)
{
    struct dt_model *m = tr->model;
    struct dt_strat *st = tr->strategy;
    struct dt_loss_sink sink = {tr->loss_acc, tr->gas};
    double loss = 0, t = dt_now(), t1; /* 0 if the copy back fails: synchronize reports why */
    tr->k->zero(tr->kc, tr->loss_acc, sizeof *tr->loss_acc);
    for (int micro = 0; micro < tr->gas; micro++) {
        int64_t first = tr->state.samples + ((int64_t)micro * tr->world + tr->rank) * tr->B;
        struct dt_batch b = fill(tr, &tr->train, first);
        m->iface.forward(m, &b, (float)tr->state.scaler.scale / (float)(tr->gas * st->grad_divisor), &sink);
        tr->t_forward += (t1 = dt_now()) - t;
        dt_engine_before_backward(st->engine, micro == tr->gas - 1);
        m->iface.backward(m);
        tr->t_backward += (t = dt_now()) - t1;
    }
    tr->k->copy(tr->kc, &loss, tr->loss_acc, sizeof loss, DT_COPY_TO_HOST);
    tr->t_backward += dt_now() - t; /* the wait for the last kernels */
    return loss;
}

/* A save at this step boundary, decided by every rank alike: begin it, and finish it at once when
 * the run stops here (the end, or a signal). A save still being written is finished first. */
static dt_status_t checkpoint(struct trainer *tr, bool stop)
{
    if (tr->pending) dt_train_ckpt_finish(tr, false); /* its failure is reported; the newer save may work */
    dt_train_ckpt_begin(tr);
    return stop ? dt_train_ckpt_finish(tr, true) : DT_SUCCESS;
}

/* After a signal, its state saved (unless checkpoint.dir is null): say so where the run is
 * watched, and stop. */
static dt_status_t stopped(struct trainer *tr, int sig, struct dt_train_result *res)
{
    bool saved = tr->ckpt_dir[0];
    res->stopped_by = sig;
    if (saved) snprintf(res->checkpoint, sizeof res->checkpoint, "%s/step-%08lld", tr->ckpt_dir,
                        (long long)tr->state.step);
    if (tr->rank == 0) DT_CHECK(dt_events_preempted(&tr->events, tr->state.step, dt_signals_name(sig), saved));
    return DT_SUCCESS;
}

/* A wall clock stepped between two steps (NTP, date -s, a resumed VM) is said once, so that a gap in
 * the events' times is not taken for a stall: nothing timed reads it (clock.h). */
static void watch_clock(struct trainer *tr, int64_t step1, bool ending)
{
    struct timespec w = dt_wall_now();
    double skew = (double)w.tv_sec + w.tv_nsec * 1e-9 - dt_now(), jump = skew - tr->wall_skew;
    if (fabs(jump) > 60) { /* NTP's slewing moves it far less between two steps */
        char at[64];
        if (ending) snprintf(at, sizeof at, "at exit, after step %lld", (long long)tr->steps);
        else snprintf(at, sizeof at, "as step %lld started", (long long)step1);
        DT_WARN("rank %d: the wall clock jumped %+.0f s %s: event times and checkpoints' saved_at follow it; "
                "timeouts, intervals and step times do not (they read CLOCK_MONOTONIC)", tr->rank, jump, at);
    }
    tr->wall_skew = skew;
}

/* As step step1 (1-based) starts on this rank; step1 one past the last step is the exit: after the
 * last step's update, as its final save begins. DTRUN_FAULT (fault.h) strikes here, and the
 * launcher's step board (launch.h) learns the step. */
static void step_starts(struct trainer *tr, int64_t step1)
{
    bool ending = step1 > tr->steps;
    dt_fault_at(step1, tr->rank); /* a clock fault of this step moves the wall clock now */
    dt_launch_note_step(tr->rank, ending ? -tr->steps : step1);
    watch_clock(tr, step1, ending);
    if (dt_fault_hit(DT_FAULT_KILL, step1, tr->rank)) raise(SIGKILL);
    if (dt_fault_hit(DT_FAULT_STOP, step1, tr->rank)) raise(SIGSTOP);
    if (dt_fault_hit(DT_FAULT_HOG, step1, tr->rank) && !tr->hog && (tr->hog = malloc(HOG_BYTES)))
        memset(tr->hog, 1, HOG_BYTES); /* touched, so that it is resident */
    if (!ending && dt_fault_since(DT_FAULT_SLOW, step1, tr->rank)) nanosleep(&(struct timespec){0, 10000000}, NULL);
    /* a stall of a step is met by its first collective (comm.c); the exit's, here */
    if (ending && dt_fault_hit(DT_FAULT_STALL, step1, tr->rank)) dt_fault_stall_forever();
}

/* What the run does outside its steps (validation, saving) is left out of its step time, and out of
 * the breakdown by op (events.wall_clock_breakdown) with it: the ops then sum to at most the step. */
static void untimed(struct trainer *tr, bool on)
{
    if (tr->cfg->events.wall_clock_breakdown) dt_kprofile_pause(tr->kc, on);
}

static dt_status_t loop(struct trainer *tr, struct dt_train_result *res)
{
    const struct dt_config *cfg = tr->cfg;
    struct dt_strat *st = tr->strategy;
    int64_t gb = cfg->resolved.global_batch, first_step = tr->state.step;
    double start = dt_now(), since = start;
    int64_t since_step = first_step;
    struct timespec wall = dt_wall_now();
    tr->wall_skew = (double)wall.tv_sec + wall.tv_nsec * 1e-9 - start;
    tr->last_save = start;
    untimed(tr, false); /* the steps' ops from here (setup paused them) */
    res->loss = tr->state.loss;
    res->val_loss = tr->state.val_loss;
    res->steps = tr->state.step;
    if (first_step >= tr->steps && tr->rank == 0) {
        if (tr->config_diff[0])
            DT_INFO(DT_SUB_TRAIN, "the run is complete: %s holds step %lld of %lld, trained with a config other than "
                    "this one (%s); nothing to train\n  hint: raise run.max_duration to go on with this config, or "
                    "set checkpoint.resume: none (or another run.dir) to train it afresh", tr->resumed,
                    (long long)first_step, (long long)tr->steps, tr->config_diff);
        else
            DT_INFO(DT_SUB_TRAIN, "the run is complete: %s holds step %lld of %lld; nothing to train (raise "
                    "run.max_duration to go on, or set checkpoint.resume: none to start afresh)", tr->resumed,
                    (long long)first_step, (long long)tr->steps);
    }
    for (int64_t step = first_step; step < tr->steps; step++) {
        tr->step = step;
        step_starts(tr, step + 1);
        dt_engine_begin_step(st->engine, step);
        if (tr->prec.fp8 && dt_fault_hit(DT_FAULT_FP8_JUMP, step + 1, tr->rank)) dt_fp8_jump(&tr->fp8, 4096.0f);
        double t = dt_now();
        /* the loss's all-reduce carries the step boundary's decisions: a signal seen by any rank, a
         * wall-clock save due on rank 0, a save still being written anywhere */
        double v[4] = {forward_backward(tr)};
        v[1] = dt_signals_pending() != 0;
        v[2] = tr->rank == 0 && tr->ckpt_secs > 0 && dt_now() - tr->last_save >= tr->ckpt_secs;
        v[3] = tr->pending && dt_ckpt_busy(tr->writer);
        double t1 = dt_now();
        DT_CHECK(dt_engine_reduce_grads(st->engine));
        DT_CHECK(dt_strategy_mean(st, v, 4));
        double loss = v[0];
        tr->t_comm += (t = dt_now()) - t1;
        if (!isfinite(loss)) {
            /* a kernel that failed (out of scratch memory) leaves a NaN loss: its own error first */
            DT_CHECK(tr->k->synchronize(tr->kc, step + 1));
            return dt_error(DT_ERR_TRAIN, "dtrun: error: the loss is %f at step %lld\n  hint: lower optimizer.lr or "
                            "set compute.gradient_clipping", loss, (long long)step + 1);
        }
        float norm;
        double lr, scale = tr->state.scaler.scale;
        DT_CHECK(apply_step(tr, step, &norm, &lr));
        DT_CHECK(fp8_step(tr));
        DT_CHECK(tr->k->synchronize(tr->kc, step + 1)); /* a GPU op's failure surfaces here, with its step */
        tr->t_optimizer += (t1 = dt_now()) - t;
        struct dt_run_state *s = &tr->state;
        s->step = step + 1;
        s->samples += gb;
        s->tokens += gb * tr->T;
        s->loss = loss;
        bool last = step + 1 == tr->steps;
        if ((step + 1) % tr->log_every == 0 || last) {
            DT_CHECK(report(tr, step, loss, lr, norm, scale, t1 - since, step + 1 - since_step, t1 - start,
                            step + 1 - first_step));
            tr->t_forward = tr->t_backward = tr->t_comm = tr->t_optimizer = 0;
            since = dt_now();
            since_step = step + 1;
        }
        res->loss = loss;
        res->steps = step + 1;
        if (tr->eval_every > 0 && ((step + 1) % tr->eval_every == 0 || last)) {
            if (tr->val.synthetic || tr->val.nshards) {
                double t0 = dt_now();
                untimed(tr, true);
                DT_CHECK(evaluate(tr, &res->val_loss));
                untimed(tr, false);
                s->val_loss = res->val_loss;
                if (tr->rank == 0) DT_CHECK(dt_events_eval(&tr->events, step + 1, res->val_loss));
                since += dt_now() - t0; /* validation is not training time */
            }
        }
        if (tr->sample_every > 0 && ((step + 1) % tr->sample_every == 0 || last)) {
            double t0 = dt_now();
            untimed(tr, true);
            /* a sample runs the 16-bit linear layers, as dtrun generate does: the GPU's FP8 gemms take
             * rows in multiples of 16, and a decode step is one row (the prompt's at the first) */
            const struct dt_fp8_meta *fp8 = tr->model->fp8;
            tr->model->fp8 = NULL;
            dt_status_t rc = dt_train_sample(tr, step + 1);
            tr->model->fp8 = fp8;
            DT_CHECK(rc);
            untimed(tr, false);
            since += dt_now() - t0; /* sampling is not training time */
        }
        if (last) step_starts(tr, tr->steps + 1);
        bool stop = v[1] > 0;
        if (tr->ckpt_dir[0]) {
            if (tr->pending && v[3] == 0) dt_train_ckpt_finish(tr, false); /* every rank's file is down: commit */
            if (last || stop || v[2] > 0 || (tr->ckpt_every > 0 && (step + 1) % tr->ckpt_every == 0)) {
                double t0 = dt_now();
                untimed(tr, true);
                DT_CHECK(checkpoint(tr, last || stop));
                untimed(tr, false);
                since += dt_now() - t0; /* saving is not training time */
            }
        }
        if (stop && !last) {
            int sig = dt_signals_pending();
            return stopped(tr, sig ? sig : SIGTERM, res); /* a rank that saw none stops for the others' */
        }
    }
    if (tr->pending) DT_CHECK(dt_train_ckpt_finish(tr, true));
    if (cfg->events.wall_clock_breakdown && tr->rank == 0) dt_breakdown_log(tr->kc, tr->train_steps, tr->train_s);
    double secs = dt_now() - start;
    int64_t run = tr->state.step - first_step;
    res->trained = run;
    res->tokens_per_s = secs > 0 ? (double)run * gb * tr->T / secs : 0;
    if (tr->rank == 0)
        DT_CHECK(dt_events_run_finished(&tr->events, tr->state.step, res->loss, res->val_loss, secs, tr->state.tokens));
    return DT_SUCCESS;
}

/* The run's measured peak against the plan (memory.h): the host's (a CPU run holds everything
 * there) or the GPU's; more than 10% over it is said, with both numbers. A sanitizer build's host
 * peak is ASan's too (shadow memory, the quarantine of freed blocks): the plan is for the build users
 * run, and the sanitizer suite would warn on every run. */
static void check_peak(struct trainer *tr)
{
#if defined(__SANITIZE_ADDRESS__)
    if (!tr->plan.gpu) return;
#endif
    int64_t peak, plan = tr->plan.gpu ? tr->plan.device : tr->plan.host, reserved;
    const char *where = tr->plan.gpu ? "device" : "host";
    if (tr->plan.gpu && tr->k->device_memory) {
        tr->k->device_memory(tr->kc, &peak, &reserved);
    } else {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        peak = (int64_t)ru.ru_maxrss * 1024;
    }
    if (plan > 0 && (double)peak > 1.10 * (double)plan)
        DT_WARN("this rank's %s memory peaked at %.1f MiB, %.2fx the %.1f MiB planned for it (dtrun check --memory)\n"
                "  hint: the plan misses something this run holds: size its nodes with room to spare, and report the "
                "config with this line",
                where, (double)peak / 1048576, (double)peak / (double)plan, (double)plan / 1048576);
}

/* A GPU run's device for run_started ("cuda:0 (NVIDIA H200, 139.8 GiB, sm_90, ...)") and, unless
 * events.peak_tflops says, the peak its name has in peak.h's table for MFU. A device that cannot be
 * described costs the MFU, said once, not the run (and every rank goes on to the same collectives). */
static void gpu_peak(struct trainer *tr, char *device, size_t n)
{
    char desc[256];
    if (dt_backend_gpu_describe(tr->device, desc, sizeof desc) != DT_SUCCESS) {
        if (tr->rank == 0)
            DT_WARN("cannot name cuda:%d (%s): mfu is null in the metrics unless events.peak_tflops is set",
                    tr->device, dt_error_msg());
        snprintf(device, n, "cuda:%d", tr->device);
        return;
    }
    snprintf(device, n, "cuda:%d (%s)", tr->device, desc);
    desc[strcspn(desc, ",")] = 0; /* the name */
    if (tr->peak_tflops > 0) return;
    tr->peak_tflops = dt_peak_tflops(desc, tr->prec.compute);
    if (tr->rank != 0) return;
    if (tr->peak_tflops > 0)
        DT_INFO(DT_SUB_TRAIN, "MFU against %s's peak dense %s rate, %.1f TFLOP/s (events.peak_tflops overrides)",
                desc, tr->prec.compute == DT_F32 ? "fp32" : dt_dtype_str(tr->prec.compute), tr->peak_tflops);
    else
        DT_WARN("no peak rate known for %s: mfu is null in the metrics\n"
                "  hint: set events.peak_tflops to one device's peak dense TFLOP/s for this precision", desc);
}

dt_status_t dt_train(const struct dt_config *cfg, const struct dt_world *w, const struct dt_devmap *dev,
                     struct dt_train_result *res)
{
    *res = (struct dt_train_result){.val_loss = NAN, .loss_floor = NAN};
    DT_CHECK(supported(cfg));
    struct trainer tr = {0};
    DT_CHECK(dt_kernels_choose(dev->ordinal, &tr.k));
    tr.device = dev->ordinal;
    if (w->rank == 0) warn_risky(cfg);
    dt_status_t rc = setup(&tr, cfg, w);
    if (rc == DT_SUCCESS) {
        res->activation_bytes = tr.model->activation_bytes;
        char source[256], model[128];
        if (cfg->model.type == DT_MODEL_MLP)
            snprintf(model, sizeof model, "MLP %s, %d hidden layer%s", cfg->model.mlp.task == DT_TASK_REGRESSION ?
                     "regression" : "classification", cfg->model.mlp.hidden.n, cfg->model.mlp.hidden.n != 1 ? "s" : "");
        else if (cfg->model.type == DT_MODEL_LLAMA)
            snprintf(model, sizeof model, "Llama %lld layers, %lld query heads on %lld key/value heads",
                     (long long)cfg->model.n_layer, (long long)cfg->model.n_head, (long long)cfg->model.n_kv_head);
        else snprintf(model, sizeof model, "GPT %lld layers", (long long)cfg->model.n_layer);
        if (tr.train.features) {
            res->loss_floor = dt_teacher_loss_floor(&tr.train.teacher);
            snprintf(source, sizeof source, "synthetic teacher source (best loss %.4f)", res->loss_floor);
        } else if (tr.train.synthetic) {
            res->loss_floor = dt_markov_loss_floor(&tr.train.markov, tr.T);
            snprintf(source, sizeof source, "synthetic order-%d Markov source (entropy rate %.4f, best loss %.4f)",
                     tr.train.markov.order, dt_markov_entropy_rate(&tr.train.markov), res->loss_floor);
        } else {
            snprintf(source, sizeof source, "%d shard%s, %zu sequences", tr.train.nshards, tr.train.nshards > 1 ? "s" : "",
                     dt_dataset_windows(&tr.train));
        }
        char paths[256];
        tr.model->k->describe(tr.model->kc, paths, sizeof paths, tr.prec.compute);
        DT_INFO(DT_SUB_TRAIN, "training %s: %s, %.2fM parameters, %lld steps of %lld x %d tokens, on %d "
                "CPU thread%s (%s); %s; activations %.1f MiB; %d rank%s (%s); precision %s",
                cfg->run.name, model, tr.model->nparams / 1e6, (long long)tr.steps,
                (long long)cfg->resolved.global_batch, tr.T, dt_kernels_threads(), dt_kernels_threads() > 1 ? "s" : "",
                paths, source, tr.model->activation_bytes / 1048576.0, tr.world, tr.world > 1 ? "s" : "", tr.strategy->name,
                tr.prec.name);
        char world[160], device[320], device_plan[64];
        dt_world_describe(w, world, sizeof world);
        snprintf(device, sizeof device, "cpu (%d thread%s)", dt_kernels_threads(), dt_kernels_threads() > 1 ? "s" : "");
        tr.peak_tflops = cfg->events.peak_tflops;
        const struct dt_model *m = tr.model;
        struct dt_mem_report mem;
        dt_engine_memory(tr.strategy->engine, &mem);
        double most = (double)mem.state;
        rc = dt_strategy_max(tr.strategy, &most, 1);
        if (tr.device >= 0) gpu_peak(&tr, device, sizeof device);
        struct dt_run_info info = {
            .model = model, .params = (int64_t)m->nparams, .steps = tr.steps, .world = world, .device = device,
            .strategy = tr.strategy->name, .precision = tr.prec.name, .param_bytes = mem.params,
            .grad_bytes = mem.grads, .master_bytes = mem.master, .optimizer_bytes = mem.optimizer,
            .gathered_bytes = mem.gathered, .buffer_bytes = mem.buffers, .state_max_bytes = (int64_t)most,
            .activation_bytes = (int64_t)m->activation_bytes, .resumed_from = tr.resumed[0] ? tr.resumed : NULL,
            .resumed_step = tr.resumed_step};
        DT_INFO(DT_SUB_TRAIN, "model state on this rank: %.1f MiB (parameters %.1f, gradients %.1f, master weights "
                "%.1f, optimizer %.1f, gathered %.1f), the most on any rank %.1f MiB; workspace %.1f MiB; "
                "checkpoint copy %.1f MiB; planned for this rank: %s%.1f MiB of host memory (dtrun check --memory)",
                (double)mem.state / 1048576, (double)mem.params / 1048576, (double)mem.grads / 1048576,
                (double)mem.master / 1048576, (double)mem.optimizer / 1048576, (double)mem.gathered / 1048576,
                most / 1048576, (double)mem.buffers / 1048576, (double)tr.ckpt_bytes / 1048576,
                tr.plan.gpu ? dt_memory_device_str(&tr.plan, device_plan, sizeof device_plan) : "",
                (double)tr.plan.host / 1048576);
        if (rc == DT_SUCCESS && tr.rank == 0) rc = dt_events_run_started(&tr.events, &info);
        if (rc == DT_SUCCESS) rc = loop(&tr, res);
        if (rc == DT_SUCCESS) check_peak(&tr);
    }
    /* every rank at the end, under the watchdog: a rank hung at exit is named here, rather than
     * leaving the others waiting in the communicators' teardown (MPI_Finalize waits for every rank) */
    if (rc == DT_SUCCESS && tr.world > 1 && !res->stopped_by)
        rc = dt_comm_do(tr.strategy->comm, dt_coll_barrier("the end of the run"));
    /* the rank that saw a failure reports it (every rank, when all saw it) */
    if (rc != DT_SUCCESS && tr.events_open) dt_events_run_failed(&tr.events, tr.step < 0 ? -1 : tr.step + 1,
                                                                 dt_error_msg());
    teardown(&tr, rc == DT_SUCCESS); /* events flushed, run.dir released: then the job may go */
    if (rc != DT_SUCCESS || !res->stopped_by) return rc;
    if (w->rank != 0) return DT_SUCCESS; /* rank 0 speaks for the run */
    if (!res->checkpoint[0])
        return dt_error(DT_STOPPED, "dtrun: stopped by %s after step %lld, with nothing saved (checkpoint.dir is "
                        "null)", dt_signals_name(res->stopped_by), (long long)res->steps);
    dt_signals_requeue(res->stopped_by, res->checkpoint, &res->requeued);
    if (res->requeued) return DT_SUCCESS;
    return dt_error(DT_STOPPED, "dtrun: stopped by %s after step %lld; its state is saved in %s\n  hint: run the same "
                    "command again to resume (checkpoint.resume: auto)", dt_signals_name(res->stopped_by),
                    (long long)res->steps, res->checkpoint);
}
