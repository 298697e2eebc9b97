/*
 * trainer_impl.h - the trainer's state, shared by trainer.c (the loop) and
 * checkpoint.c (resume and save). The run's state is one struct
 * (dt_run_state: counters, run id, loss scaler) plus the engine's arrays; a
 * checkpoint writes exactly those and a resume reads them back.
 */
#ifndef DT_TRAINER_IMPL_H
#define DT_TRAINER_IMPL_H

#include "ckpt/ckpt.h"
#include "core/dirlock.h"
#include "data/loader.h"
#include "events/events.h"
#include "model/model.h"
#include "optim/sched.h"
#include "precision/fp8.h"
#include "precision/policy.h"
#include "strategy/strategy.h"
#include "train/memory.h"
#include "tokenize/tokenizer.h"
#include "train/trainer.h"

/* what each rank tells rank 0 of its checkpoint file */
struct dt_ckpt_report {
    struct dt_ckpt_file file;
    double seconds;
    int32_t ok;
    char error[420];
};

struct trainer {
    const struct dt_config *cfg;
    const struct dt_kernels *k; /* this rank's op table and its context (dt_kernels_choose) */
    struct dt_kctx *kc;
    int device; /* the GPU ordinal, or -1 */
    double peak_tflops; /* one device's peak for MFU: events.peak_tflops, else the GPU's (peak.h); 0: unknown */
    struct dt_model *model;
    struct dt_sched sched;
    struct dt_dataset train, val;
    struct dt_strat *strategy;
    struct dt_prec_policy prec;
    struct dt_fp8_state fp8; /* fp8-mixed's scales (n 0 otherwise) */
    int64_t fp8_overflows;   /* tensors that overflowed their scale so far (metrics: fp8_overflows) */
    float *fp8_pending;      /* a save's copy of the fp8 state, taken at its step boundary (host) */
    struct dt_run_state state; /* step, samples, tokens, run id, loss scaler, last validation */
    int rank, world, B, T, gas;
    int64_t steps, eval_every, log_every, steps_per_epoch;
    int32_t *tokens, *labels; /* GPT tokens (B, T+1); MLP labels (B) */
    double *loss_acc;         /* kernel memory: the step's loss, summed where the kernels run, read once */
    float *x, *y;             /* MLP features (B, in) and regression targets (B, out) */
    struct dt_events events;
    bool events_open;
    struct dt_dirlock lock; /* rank 0: run.dir is this run's */
    int64_t step;           /* the step in progress, for run_failed */
    double wall_skew;       /* the wall clock minus CLOCK_MONOTONIC at the last step's start (watch_clock) */
    /* seconds spent in each part of the step since the last metrics record */
    double t_forward, t_backward, t_comm, t_optimizer;
    double train_s;      /* seconds of the steps reported so far (metrics intervals) */
    int64_t train_steps; /* and how many */
    /* checkpoints */
    char ckpt_dir[4096];
    char resumed[4096]; /* the checkpoint this run resumed from ("": none) */
    int64_t resumed_step;
    char config_diff[1100]; /* rank 0: how this config differs from the one that wrote it ("": the same) */
    char tag[24];       /* this start of the run: names its partial saves */
    int64_t ckpt_every; /* steps between saves; 0: none in between */
    double ckpt_secs;   /* or wall-clock seconds between saves */
    double last_save;   /* when the last save began (rank 0's clock) */
    struct dt_ckpt_writer *writer;
    size_t ckpt_bytes; /* the state a save copies: this rank's share */
    struct dt_memory_plan plan; /* what this rank will hold (memory.h), checked before anything is allocated */
    void *hog;                  /* DTRUN_FAULT=hog's memory */
    struct dt_ckpt_report *reports; /* one a rank, taken at start: a save's collectives cannot fail to allocate */
    struct dt_ckpt_file *files;
    struct dt_dirlock ckpt_lock;    /* rank 0: a checkpoint.dir outside run.dir is this run's too */
    bool pending; /* a save begun and not yet committed */
    bool began;   /* its copy and writer started (else begin_error says why) */
    char begin_error[420];
    struct dt_run_state pending_state;
    /* samples (events.sample_interval): every this many steps (0: never), the tokenizer (NULL: bytes),
     * the prompt's ids */
    int64_t sample_every;
    dt_tokenizer_t sample_tok;
    int32_t *sample_prompt;
    int sample_n;
};

/* checkpoint.c */
/* Where checkpoints go (checkpoint.dir; relative: under run.dir) and how often. */
void dt_train_ckpt_settings(struct trainer *tr);
/* Rank 0: the checkpoint to resume from, if any (tr->resumed), and its state into tr->state.
 * shape: this config's model, compared with the checkpoint's. */
dt_status_t dt_train_ckpt_choose(struct trainer *tr, const char *shape);
/* Every rank, after the strategy is attached: the resumed checkpoint's arrays into the engine. */
dt_status_t dt_train_ckpt_load(struct trainer *tr);
/* The writer and the memory a save copies into, taken before training (bytes: how much). */
dt_status_t dt_train_ckpt_prepare(struct trainer *tr, size_t *bytes);
/* Copy this rank's state and start writing it; a failure is kept for finish to report (every rank
 * decided to save together, so every rank goes on to finish together). */
void dt_train_ckpt_begin(struct trainer *tr);
/* Collective: wait for every rank's file, commit on rank 0, report checkpoint_saved or _failed.
 * Fails when the save did (every rank gets the same status). fatal: the caller ends the run on that
 * failure, so its error is the one message; otherwise rank 0 warns and training goes on. */
dt_status_t dt_train_ckpt_finish(struct trainer *tr, bool fatal);

/* samples.c */
/* The tokenizer and the prompt's ids, when events.sample_interval asks for samples. */
dt_status_t dt_train_samples_open(struct trainer *tr);
/* Collective (a sharded model's units are gathered as its forward uses them): a sample from the
 * weights after step, printed and sent by rank 0. */
dt_status_t dt_train_sample(struct trainer *tr, int64_t step);
void dt_train_samples_close(struct trainer *tr);

#endif
