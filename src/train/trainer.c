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
#include "optim/sched.h"
#include "precision/policy.h"
#include "strategy/strategy.h"
#include "train/shapes.h"
#include "train/trainer.h"

struct trainer {
    const struct dt_config *cfg;
    struct dt_model *model;
    struct dt_sched sched;
    struct dt_dataset train, val;
    struct dt_strat *strategy;
    struct dt_prec_policy prec;
    struct dt_loss_scaler scaler;
    int64_t opt_steps;          /* optimizer steps taken (skipped ones excluded): the LR schedule's clock */
    int rank, world, B, T, gas;
    int64_t steps, eval_every, log_every, steps_per_epoch;
    int32_t *tokens, *labels; /* GPT tokens (B, T+1); MLP labels (B) */
    float *x, *y;             /* MLP features (B, in) and regression targets (B, out) */
    struct dt_events events;
    bool events_open;
    struct dt_dirlock lock; /* rank 0: run.dir is this run's */
    int64_t step; /* the step in progress, for run_failed */
    /* seconds spent in each part of the step since the last metrics record */
    double t_forward, t_backward, t_comm, t_optimizer;
};

/* What this build can run; the rest of the config is valid, just not here yet. */
static dt_status_t supported(const struct dt_config *cfg, const struct dt_devmap *dev)
{
    if (dev->ordinal >= 0) {
        char line[256];
        dt_device_describe(dev, line, sizeof line);
        return dt_error(DT_ERR_CONFIG, "dtrun: error: compute.device is cuda and this rank has %s, but dtrun trains "
                        "on CPUs only until its GPU backend lands (issue #14)\n  hint: set compute.device: cpu", line);
    }
    if (cfg->model.init_from && cfg->model.type == DT_MODEL_MLP)
        return dt_error(DT_ERR_CONFIG, "dtrun: error: model.init_from loads llm.c GPT weights; an mlp has none\n"
                        "  hint: remove model.init_from");
    return DT_SUCCESS;
}

/* Settings this build reads but does not act on yet: said once, by name, never dropped silently. */
static void warn_inert(const struct dt_config *cfg)
{
    static const char *const ckpt_keys[] = {"checkpoint.dir", "checkpoint.interval", "checkpoint.keep",
                                             "checkpoint.resume"};
    for (size_t i = 0; i < sizeof ckpt_keys / sizeof ckpt_keys[0]; i++) {
        char where[256];
        const struct dt_origin *o = dt_config_origin(cfg, ckpt_keys[i]);
        if (o->kind == DT_ORIGIN_DEFAULT || o->kind == DT_ORIGIN_AUTO) continue;
        dt_loc_str(o->loc, where, sizeof where);
        DT_WARN("%s: %s is set, but this build neither writes nor reads checkpoints yet (issue #12): the run starts "
                "at step 0 and saves nothing", where, ckpt_keys[i]);
    }
    if (cfg->events.webhook.url && cfg->events.webhook.insecure)
        DT_WARN("events.webhook.insecure is true: the webhook's TLS certificate is not verified, so anyone on the path "
                "can read or forge what is sent");
}

/* Rank 0 takes run.dir for this run (dirlock.h) and draws the run id; every rank receives the id,
 * empty when rank 0 could not take the directory, so no rank writes into a directory another run
 * holds. */
static dt_status_t claim_run_dir(struct trainer *tr, char id[40])
{
    struct dt_strat *st = tr->strategy;
    const char *dir = tr->cfg->run.dir;
    dt_status_t rc = DT_SUCCESS;
    if (st->rank == 0) {
        rc = dt_mkdirs(dir);
        if (rc == DT_SUCCESS) rc = dt_dirlock_take(&tr->lock, dir, "run.dir");
        if (rc == DT_SUCCESS) dt_events_new_run_id(id);
    }
    dt_status_t sent = st->comm ? dt_comm_do(st->comm, dt_coll_broadcast(id, 40, DT_U8, 0, "run id")) : DT_SUCCESS;
    DT_CHECK(rc); /* rank 0's own message */
    DT_CHECK(sent);
    if (!id[0])
        return dt_error(DT_ERR_CONFIG, "dtrun: rank %d: error: rank 0 could not take run.dir %s; its message says why",
                        st->rank, dir);
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

static dt_status_t setup(struct trainer *tr, const struct dt_config *cfg, const struct dt_world *w)
{
    tr->cfg = cfg;
    if (w->size != cfg->resolved.world)
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: the config resolved %d ranks but %d were started",
                        cfg->resolved.world, w->size);
    tr->rank = w->rank;
    tr->world = w->size;
    DT_CHECK(dt_precision_from_config(cfg, &tr->prec));
    dt_loss_scaler_init(&tr->scaler, &tr->prec.scaler);
    dt_log_set_rank(w->rank, w->size);
    DT_CHECK(dt_strategy_create(cfg, &tr->prec, w, &tr->strategy));
    char run_id[40] = "";
    DT_CHECK(claim_run_dir(tr, run_id));
    if (w->rank == 0) DT_CHECK(save_config(cfg));
    DT_CHECK(dt_events_open(&tr->events, cfg, w, run_id));
    tr->events_open = true;
    tr->step = -1;
    bool mlp = cfg->model.type == DT_MODEL_MLP;
    tr->B = (int)cfg->data.micro_batch_size;
    tr->T = mlp ? 1 : (int)cfg->model.seq_len; /* an MLP's "tokens" are its samples */
    tr->gas = (int)cfg->compute.gradient_accumulation_steps;
    if (dt_kernels_cpu.init) dt_kernels_cpu.init();
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
    tr->log_every = dt_duration_steps(cfg->events.interval, &u, tr->steps);
    if (tr->log_every < 1) tr->log_every = 1;
    dt_sched_from_config(&tr->sched, cfg, &u, tr->steps);

    if (mlp) {
        struct dt_mlp_config mc;
        dt_shapes_mlp(cfg, &mc);
        DT_CHECK(dt_mlp_create(&mc, &dt_kernels_cpu, tr->B, &tr->model));
        dt_mlp_init(tr->model, (uint64_t)cfg->run.seed);
        tr->x = malloc((size_t)tr->B * mc.in * sizeof(float));
        tr->y = malloc((size_t)tr->B * mc.out * sizeof(float));
        tr->labels = malloc((size_t)tr->B * sizeof(int32_t));
        if (!tr->x || !tr->y || !tr->labels) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the batch");
    } else {
        struct dt_gpt_config gc;
        dt_shapes_gpt(cfg, tr->prec.compute, &gc);
        DT_CHECK(dt_gpt_create(&gc, &dt_kernels_cpu, tr->B, tr->T, &tr->model));
        if (cfg->model.init_from) DT_CHECK(dt_gpt_load_llmc(tr->model, cfg->model.init_from));
        else dt_gpt_init(tr->model, (uint64_t)cfg->run.seed);
    }
    struct dt_optim_config oc;
    dt_shapes_optim(cfg, &oc);
    tr->model->compute = tr->prec.compute;
    DT_CHECK(dt_strategy_attach(tr->strategy, tr->model, &oc));
    tr->tokens = malloc((size_t)tr->B * (tr->T + 1) * sizeof(int32_t)); /* GPT; small for an MLP */
    if (!tr->tokens) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the batch");
    return DT_SUCCESS;
}

static void teardown(struct trainer *tr, bool clean)
{
    dt_strategy_free(tr->strategy, clean);
    dt_model_free(tr->model);
    dt_dataset_close(&tr->train);
    dt_dataset_close(&tr->val);
    if (tr->events_open) dt_events_close(&tr->events);
    dt_dirlock_release(&tr->lock); /* after the events: their spool lives in run.dir */
    free(tr->tokens);
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
    for (int i = 0; i < n; i++) {
        struct dt_batch b = fill(tr, &tr->val, ((int64_t)i * tr->world + tr->rank) * tr->B);
        sum += tr->model->iface.forward(tr->model, &b, 0.0f);
    }
    *out = n ? sum / n : NAN;
    return dt_strategy_mean(tr->strategy, out, 1);
}

/* Said once per change of the scaler, never once per skipped step (REFERENCE.md problems 28-30). */
static void report_scale(const struct trainer *tr, int64_t step, enum dt_scale_event ev, double before)
{
    const struct dt_loss_scaler *s = &tr->scaler;
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
    double scale = tr->scaler.scale, sumsq;
    bool nonfinite;
    if (dt_fault_hit(DT_FAULT_GRAD_INF, step + 1, tr->rank)) dt_engine_poison_grad(e);
    DT_CHECK(dt_engine_grad_norm(e, &sumsq, &nonfinite));
    bool overflow = tr->prec.scaled && nonfinite;
    enum dt_scale_event ev;
    DT_CHECK(dt_loss_scaler_update(&tr->scaler, overflow, step, &ev));
    report_scale(tr, step, ev, scale);
    *lr = dt_sched_lr(&tr->sched, tr->opt_steps);
    *norm = NAN;
    if (overflow) return DT_SUCCESS;
    /* torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6) when that is below 1 */
    float clip = (float)tr->cfg->compute.gradient_clipping;
    *norm = (float)(sqrt(sumsq) / scale);
    float f = clip > 0 && clip / (*norm + 1e-6f) < 1.0f ? clip / (*norm + 1e-6f) : 1.0f;
    DT_CHECK(dt_engine_step(e, (float)*lr, f / (float)scale));
    tr->opt_steps++;
    return DT_SUCCESS;
}

/* The metrics record of the steps since the last one: the loss of this step (already the mean
 * over ranks), throughput over the interval, the slowest rank's step time and largest memory. */
static dt_status_t report(struct trainer *tr, int64_t step, double loss, double lr, float norm, double scale,
                          double interval_s, int64_t interval_steps, double elapsed)
{
    const struct dt_config *cfg = tr->cfg;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double slowest[2] = {interval_s / (double)interval_steps * 1e3, (double)ru.ru_maxrss * 1024};
    DT_CHECK(dt_strategy_max(tr->strategy, slowest, 2));
    if (tr->rank != 0) return DT_SUCCESS;
    double samples_per_step = (double)cfg->resolved.global_batch, per = 1e3 / (double)interval_steps;
    struct dt_metrics m = {
        .step = step + 1, .steps = tr->steps, .epoch = tr->steps_per_epoch ? step / tr->steps_per_epoch : 0,
        .tokens = (int64_t)((step + 1) * samples_per_step * tr->T), .samples = (int64_t)((step + 1) * samples_per_step),
        .skipped_steps = tr->scaler.skipped, .loss = loss, .lr = lr, .grad_norm = norm, .loss_scale = scale,
        .tokens_per_s = interval_steps * samples_per_step * tr->T / interval_s,
        .samples_per_s = interval_steps * samples_per_step / interval_s,
        .eta_s = elapsed / (double)(step + 1) * (double)(tr->steps - step - 1),
        .step_ms = slowest[0], .peak_memory_bytes = (int64_t)slowest[1],
        .breakdown = cfg->events.wall_clock_breakdown, .forward_ms = tr->t_forward * per,
        .backward_ms = tr->t_backward * per, .comm_ms = tr->t_comm * per, .optimizer_ms = tr->t_optimizer * per};
    m.mfu = cfg->events.peak_tflops > 0 ? tr->model->flops_per_token * m.tokens_per_s /
                                              (cfg->events.peak_tflops * 1e12 * tr->world)
                                        : NAN;
    return dt_events_metrics(&tr->events, &m);
}

static dt_status_t loop(struct trainer *tr, struct dt_train_result *res)
{
    const struct dt_config *cfg = tr->cfg;
    struct dt_model *m = tr->model;
    double start = dt_now(), tokens_per_step = (double)cfg->resolved.global_batch * tr->T, since = start;
    int64_t since_step = 0;
    for (int64_t step = 0; step < tr->steps; step++) {
        tr->step = step;
        struct dt_strat *st = tr->strategy;
        if (dt_fault_hit(DT_FAULT_KILL, step + 1, tr->rank)) raise(SIGKILL);
        dt_engine_begin_step(st->engine, step);
        double loss = 0, t = dt_now(), t1;
        for (int micro = 0; micro < tr->gas; micro++) {
            int64_t first = (((step * tr->gas) + micro) * tr->world + tr->rank) * tr->B;
            struct dt_batch b = fill(tr, &tr->train, first);
            loss += m->iface.forward(m, &b, (float)tr->scaler.scale / (float)(tr->gas * st->grad_divisor)) / tr->gas;
            tr->t_forward += (t1 = dt_now()) - t;
            dt_engine_before_backward(st->engine, micro == tr->gas - 1);
            m->iface.backward(m);
            tr->t_backward += (t = dt_now()) - t1;
        }
        DT_CHECK(dt_engine_reduce_grads(st->engine));
        DT_CHECK(dt_strategy_mean(st, &loss, 1));
        tr->t_comm += (t1 = dt_now()) - t;
        if (!isfinite(loss))
            return dt_error(DT_ERR_TRAIN, "dtrun: error: the loss is %f at step %lld\n  hint: lower optimizer.lr or "
                            "set compute.gradient_clipping", loss, (long long)step + 1);
        float norm;
        double lr, scale = tr->scaler.scale;
        DT_CHECK(apply_step(tr, step, &norm, &lr));
        tr->t_optimizer += (t = dt_now()) - t1;
        bool last = step + 1 == tr->steps;
        if ((step + 1) % tr->log_every == 0 || last) {
            DT_CHECK(report(tr, step, loss, lr, norm, scale, t - since, step + 1 - since_step, t - start));
            tr->t_forward = tr->t_backward = tr->t_comm = tr->t_optimizer = 0;
            since = dt_now();
            since_step = step + 1;
        }
        res->loss = loss;
        res->steps = step + 1;
        if (tr->eval_every > 0 && ((step + 1) % tr->eval_every == 0 || last)) {
            if (tr->val.synthetic || tr->val.nshards) {
                DT_CHECK(evaluate(tr, &res->val_loss));
                if (tr->rank == 0) DT_CHECK(dt_events_eval(&tr->events, step + 1, res->val_loss));
                since = dt_now(); /* validation is not training time */
            }
        }
    }
    double secs = dt_now() - start;
    res->tokens_per_s = res->steps * tokens_per_step / secs;
    if (tr->rank == 0)
        DT_CHECK(dt_events_run_finished(&tr->events, res->steps, res->loss, res->val_loss, secs,
                                        (int64_t)(res->steps * tokens_per_step)));
    return DT_SUCCESS;
}

dt_status_t dt_train(const struct dt_config *cfg, const struct dt_world *w, const struct dt_devmap *dev,
                     struct dt_train_result *res)
{
    *res = (struct dt_train_result){.val_loss = NAN, .loss_floor = NAN};
    DT_CHECK(supported(cfg, dev));
    if (w->rank == 0) warn_inert(cfg);
    struct trainer tr = {0};
    dt_status_t rc = setup(&tr, cfg, w);
    if (rc == DT_SUCCESS) {
        res->activation_bytes = tr.model->activation_bytes;
        char source[256], model[128];
        if (cfg->model.type == DT_MODEL_MLP)
            snprintf(model, sizeof model, "MLP %s, %d hidden layer%s", cfg->model.mlp.task == DT_TASK_REGRESSION ?
                     "regression" : "classification", cfg->model.mlp.hidden.n, cfg->model.mlp.hidden.n != 1 ? "s" : "");
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
        tr.model->k->describe(paths, sizeof paths, tr.prec.compute);
        DT_INFO(DT_SUB_TRAIN, "training %s: %s, %.2fM parameters, %lld steps of %lld x %d tokens, on %d "
                "CPU thread%s (%s); %s; activations %.1f MiB; %d rank%s (%s); precision %s",
                cfg->run.name, model, tr.model->nparams / 1e6, (long long)tr.steps,
                (long long)cfg->resolved.global_batch, tr.T, dt_kernels_threads(), dt_kernels_threads() > 1 ? "s" : "",
                paths, source, tr.model->activation_bytes / 1048576.0, tr.world, tr.world > 1 ? "s" : "", tr.strategy->name,
                tr.prec.name);
        char world[160], device[64];
        dt_world_describe(w, world, sizeof world);
        snprintf(device, sizeof device, "cpu (%d thread%s)", dt_kernels_threads(), dt_kernels_threads() > 1 ? "s" : "");
        const struct dt_model *m = tr.model;
        struct dt_mem_report mem;
        dt_engine_memory(tr.strategy->engine, &mem);
        double most = (double)mem.state;
        rc = dt_strategy_max(tr.strategy, &most, 1);
        struct dt_run_info info = {
            .model = model, .params = (int64_t)m->nparams, .steps = tr.steps, .world = world, .device = device,
            .strategy = tr.strategy->name, .precision = tr.prec.name, .param_bytes = mem.params,
            .grad_bytes = mem.grads, .master_bytes = mem.master, .optimizer_bytes = mem.optimizer,
            .gathered_bytes = mem.gathered, .buffer_bytes = mem.buffers, .state_max_bytes = (int64_t)most,
            .activation_bytes = (int64_t)m->activation_bytes};
        DT_INFO(DT_SUB_TRAIN, "model state on this rank: %.1f MiB (parameters %.1f, gradients %.1f, master weights "
                "%.1f, optimizer %.1f, gathered %.1f), the most on any rank %.1f MiB; workspace %.1f MiB",
                (double)mem.state / 1048576, (double)mem.params / 1048576, (double)mem.grads / 1048576,
                (double)mem.master / 1048576, (double)mem.optimizer / 1048576, (double)mem.gathered / 1048576,
                most / 1048576, (double)mem.buffers / 1048576);
        if (rc == DT_SUCCESS && tr.rank == 0) rc = dt_events_run_started(&tr.events, &info);
        if (rc == DT_SUCCESS) rc = loop(&tr, res);
    }
    /* the rank that saw a failure reports it (every rank, when all saw it) */
    if (rc != DT_SUCCESS && tr.events_open) dt_events_run_failed(&tr.events, tr.step < 0 ? -1 : tr.step + 1,
                                                                 dt_error_msg());
    teardown(&tr, rc == DT_SUCCESS);
    return rc;
}
