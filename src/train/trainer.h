/*
 * trainer.h - the training loop: gradient accumulation, global-norm clipping,
 * the LR schedule, validation every run.eval_interval, one metrics line per
 * step in <run.dir>/<events.jsonl>, and a progress line (live on a terminal,
 * every events.interval in a log file).
 */
#ifndef DT_TRAINER_H
#define DT_TRAINER_H

#include "config/config.h"
#include "launch/device.h"
#include "launch/world.h"

struct dt_train_result {
    int64_t steps;      /* the run's steps so far (a resumed run's earlier lives included) */
    int64_t trained;    /* of them, those this start trained */
    double loss;        /* mean training loss of the last step */
    double val_loss;    /* last validation (NAN when none ran) */
    double loss_floor;  /* synthetic source: the least achievable loss (NAN for files) */
    double tokens_per_s;
    size_t activation_bytes;
    int stopped_by;        /* the signal that stopped the run before its end, 0: none */
    char checkpoint[4400]; /* then: where its state was saved ("": nowhere) */
    bool requeued;         /* rank 0: and Slurm requeued the job */
};

/* Stopped by a signal, rank 0 returns DT_STOPPED (or DT_SUCCESS when Slurm requeued the job), the
 * other ranks DT_SUCCESS.
 * w: this process's place in the job (dt_world_discover); its size is cfg->resolved.world.
 * dev: the GPU it drives (dt_device_map), ordinal -1 for the CPU. */
dt_status_t dt_train(const struct dt_config *cfg, const struct dt_world *w, const struct dt_devmap *dev,
                     struct dt_train_result *res);

#endif
