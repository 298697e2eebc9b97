/*
 * ckpt.h - checkpoints: a directory CHECKPOINT_DIR/step-<N>/ holding one file
 * per rank (the ranges of the flat parameter space that rank keeps: its parts
 * under ZeRO, a 1/N share of what every rank keeps whole, so the state is
 * written once) and manifest.json (the run's counters and every file's size
 * and checksum). A directory without a valid manifest is not a checkpoint.
 *
 * Saving is crash-safe: files are written into step-<N>.partial-<start>/
 * under temporary names (O_EXCL, O_NOFOLLOW: never through a planted
 * symlink; mode 0640), fsynced and renamed; rank 0 writes the manifest last,
 * renames the directory to step-<N>, fsyncs, and replaces the `latest`
 * pointer atomically; then it keeps the checkpoint.keep newest (never the one
 * the run resumed from). The copy of a rank's state into memory is all that
 * training waits for: the file is written by a thread of its own (save.c).
 *
 * Reading (load.c) checks every file's size and XXH64 against the manifest,
 * and serves any flat range from whichever files hold it, so a checkpoint
 * written by one strategy and world loads into any other.
 *
 * Rank file (little-endian): a 64-byte header (magic "DTCKPT1\n", u32 version,
 * rank, world, arrays; u64 ranges, elements, step, data offset), the ranges
 * (offset, count: 2 x u64 each), zeros up to the data offset (a multiple of
 * 4096, so the arrays are written with O_DIRECT), then each array's values
 * (fp32) range after range.
 */
#ifndef DT_CKPT_H
#define DT_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "core/status.h"
#include "precision/loss_scaler.h"
#include "strategy/engine.h"

#define DT_CKPT_VERSION 1

/* The run's state besides the arrays: what the trainer counts, and what a checkpoint restores. */
struct dt_run_state {
    int64_t step;      /* steps completed: training goes on with step + 1 */
    int64_t opt_steps; /* optimizer updates (skipped steps excluded): Adam's t, the LR schedule's clock */
    int64_t samples, tokens;
    char run_id[40];
    struct dt_loss_scaler scaler;
    double loss;       /* the last step's training loss */
    double val_loss;   /* NaN: no validation yet */
    uint64_t seed;
    char config_hash[72];
    char model[192];   /* the model's shape, compared on resume */
    int64_t nparams;
    char optimizer[16];
    int narrays;
    char strategy[48], precision[16];
    int stage, world, restart;
    char saved_at[32];
    /* fp8-mixed's scaling state, rank 0's file fp8.bin (precision/fp8.h): its tensors, history length
     * and checksum; tensors 0: none */
    int fp8_tensors, fp8_history;
    uint64_t fp8_xxh64;
};

/* One rank's file, as the manifest lists it. */
struct dt_ckpt_file {
    char name[48];
    int64_t bytes;
    uint64_t xxh64;
};

/* ---- save.c */
struct dt_ckpt_writer;
/* Host memory for the writer's copy of the state, from whoever owns the state's memory: page-locked
 * when the state is on a GPU, so the copy runs at the link's rate. NULL: huge pages (core/mem.h). */
struct dt_host_mem {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    void *ctx;
};
/* dir: checkpoint.dir; rank of world; mem may be NULL. */
dt_status_t dt_ckpt_writer_open(const char *dir, int rank, int world, const struct dt_host_mem *mem,
                                struct dt_ckpt_writer **out);
void dt_ckpt_writer_close(struct dt_ckpt_writer *w);
/* Room for a save of these ranges, taken now (the memory a save copies into is kept between saves). */
dt_status_t dt_ckpt_writer_reserve(struct dt_ckpt_writer *w, const struct dt_range *ranges, int nranges, int narrays);
/* Copy this rank's ranges of every array into memory (get copies one range of one array), then
 * write the file in the background. tag names the save's partial directory the same on every rank. */
dt_status_t dt_ckpt_begin(struct dt_ckpt_writer *w, int64_t step, const char *tag, const struct dt_range *ranges,
                          int nranges, int narrays,
                          dt_status_t (*get)(void *ctx, int array, size_t off, size_t n, float *dst), void *ctx);
/* Whether a save is still being written. */
bool dt_ckpt_busy(struct dt_ckpt_writer *w);
/* Wait for the file; its entry for the manifest, and the seconds since begin. */
dt_status_t dt_ckpt_wait(struct dt_ckpt_writer *w, struct dt_ckpt_file *f, double *seconds);
/* Rank 0, before the commit: a small file of the save's own beside the ranks' (fp8.bin), written whole
 * and synced into the save's partial directory (the writers made it). */
dt_status_t dt_ckpt_write_extra(const char *dir, int64_t step, const char *tag, const char *name, const void *data,
                                size_t n);
/* Rank 0, once every rank's file is written: the manifest, the rename to step-<N>, `latest`, and the
 * pruning. path gets the checkpoint's directory. */
dt_status_t dt_ckpt_commit(const char *dir, const char *tag, const struct dt_run_state *meta,
                           const struct dt_ckpt_file *files, int nfiles, int keep, const char *protect, char *path,
                           size_t n);

/* The N of every step-<N> in dir, newest first (malloc'd; NULL when none or unreadable). */
long long *dt_ckpt_steps(const char *dir, int *n);
/* Rename every step-<N> with N > after to step-<N>.superseded-<tag> (a run that starts afresh, or
 * from an older checkpoint, must not be resumed later from another timeline's newer one); their
 * names go to names. Returns how many. */
int dt_ckpt_supersede(const char *dir, long long after, const char *tag, char *names, size_t n);

/* ---- load.c */
struct dt_ckpt;
/* The checkpoint at path: its manifest read, its files' sizes, headers and ranges checked, and with
 * check their checksums (one rank checks for all; reading every byte on every rank costs N reads). */
dt_status_t dt_ckpt_open(const char *path, bool check, struct dt_ckpt **out);
const struct dt_run_state *dt_ckpt_state(const struct dt_ckpt *c);
const char *dt_ckpt_path(const struct dt_ckpt *c);
/* Elements [off, off + n) of an array, from whichever files hold them. */
dt_status_t dt_ckpt_read(const struct dt_ckpt *c, int array, size_t off, size_t n, float *dst);
void dt_ckpt_close(struct dt_ckpt *c);
/* A file dt_ckpt_write_extra wrote: exactly n bytes whose XXH64 is xxh64, or an error naming it. */
dt_status_t dt_ckpt_read_extra(const struct dt_ckpt *c, const char *name, void *dst, size_t n, uint64_t xxh64);
/* Which checkpoint a run resumes from: resume "none" (none), "auto" (the newest valid one under dir,
 * skipping and naming the others; none is no error), or a path (it must be valid). *found says
 * whether there is one; path gets it. */
dt_status_t dt_ckpt_find(const char *dir, const char *resume, char *path, size_t n, bool *found);
/* Manifest text and the file list (inspect). */
dt_status_t dt_ckpt_describe(const struct dt_ckpt *c, FILE *out);

/* ---- resolve.c: the checkpoint a path names for `dtrun ckpt ...`. arg is a checkpoint (step-<N>/),
 * a checkpoint.dir (its newest valid checkpoint, the others named and skipped), its `latest` file
 * (the checkpoint it names), or a run.dir: then run_ckpt_dir is the run's checkpoint.dir, which the
 * caller read from its config.yaml ("": the run saved none; NULL: arg is no run.dir). path gets the
 * checkpoint; log, when not NULL, is told which one was chosen. None found: an error saying what was
 * looked for, and where. */
dt_status_t dt_ckpt_resolve(const char *arg, const char *run_ckpt_dir, char *path, size_t n, FILE *log);
/* The same for any argument: a run.dir is told by the config.yaml its run saved at start, whose
 * checkpoint.dir (relative: under the run.dir) is read here; the choice is said on stderr. */
dt_status_t dt_ckpt_resolve_arg(const char *arg, char *path, size_t n);

/* ---- tools.c: `dtrun ckpt ...` on one checkpoint (path from dt_ckpt_resolve); every file is checked
 * first. */
dt_status_t dt_ckpt_inspect(const char *path, FILE *out);
/* One file holding every array whole: OUT/step-<N>/, a checkpoint of world 1 (DeepSpeed's
 * zero_to_fp32, and resumable). */
dt_status_t dt_ckpt_consolidate(const char *path, const char *out, FILE *log);
/* The model a checkpoint holds, from its model line: *llama says which of gc and lc it fills; false
 * when the line is neither a GPT's nor a Llama's (an MLP). Activations fp32. */
struct dt_gpt_config;
struct dt_llama_config;
bool dt_ckpt_shape(const struct dt_run_state *s, struct dt_gpt_config *gc, struct dt_llama_config *lc, bool *llama);
/* format "llmc": llm.c's gpt2 model file at out (model.init_from reads it; a GPT only);
 * "safetensors": a Hugging Face model directory out/ (config.json, model.safetensors or shards of at
 * most shard_bytes with their index; tensors stored as dtype) with GPT-2's or Llama's names and
 * layouts, which a Llama's model.init_from reads back. */
struct dt_export {
    const char *format, *out;
    enum dt_dtype dtype;
    uint64_t shard_bytes;
};
dt_status_t dt_ckpt_export(const char *path, const struct dt_export *x, FILE *log);

#endif
