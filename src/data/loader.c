/* loader.c - see loader.h. */
#include <glob.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/rng.h"
#include "data/loader.h"
#include "data/prepare_manifest.h"

static dt_status_t open_files(struct dt_dataset *d, const char *pattern, const char *key, int vocab)
{
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
        if (rc == 0) globfree(&g);
        return dt_error(DT_ERR_DATA, "%s: error: '%s' matches no file\n  hint: check the path (relative to the "
                        "current directory), or make shards with `dtrun prepare TEXT... --out DIR`", key, pattern);
    }
    if (rc != 0) return dt_error(DT_ERR_DATA, "%s: error: cannot expand '%s'", key, pattern);
    d->nshards = (int)g.gl_pathc;
    d->shards = calloc(g.gl_pathc, sizeof *d->shards);
    d->first_window = calloc(g.gl_pathc + 1, sizeof *d->first_window);
    if (!d->shards || !d->first_window) {
        globfree(&g);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory opening %s", key);
    }
    for (size_t i = 0; i < g.gl_pathc; i++) {
        /* shards from `dtrun prepare --tokenizer` name their tokenizer: its ids must fit the model
         * (each directory once: a glob may span several) */
        const char *slash = strrchr(g.gl_pathv[i], '/'), *prev = i ? strrchr(g.gl_pathv[i - 1], '/') : NULL;
        size_t dl = slash ? (size_t)(slash - g.gl_pathv[i]) : 0;
        bool same_dir = i > 0 && (prev ? (size_t)(prev - g.gl_pathv[i - 1]) : 0) == dl &&
                        !strncmp(g.gl_pathv[i], g.gl_pathv[i - 1], dl);
        dt_status_t st = same_dir ? DT_SUCCESS : dt_prepare_manifest_check(g.gl_pathv[i], vocab, key);
        if (st != DT_SUCCESS) {
            globfree(&g);
            return st;
        }
        st = dt_shard_open(&d->shards[i], g.gl_pathv[i], vocab, (size_t)d->T + 1);
        if (st != DT_SUCCESS) {
            globfree(&g);
            return st;
        }
        d->first_window[i + 1] = d->first_window[i] + (d->shards[i].ntok - 1) / (size_t)d->T;
    }
    globfree(&g);
    d->nwindows = d->first_window[d->nshards];
    if (d->shuffle && !(d->perm = malloc(d->nwindows * sizeof *d->perm)))
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the order of %zu sequences", d->nwindows);
    return DT_SUCCESS;
}

dt_status_t dt_dataset_open(struct dt_dataset *d, const struct dt_config *cfg, bool validation)
{
    *d = (struct dt_dataset){.T = (int)cfg->model.seq_len, .seed = (uint64_t)cfg->run.seed, .perm_epoch = -1};
    if (!cfg->data.train && cfg->data.synthetic.kind == DT_SYNTH_TEACHER) {
        d->synthetic = d->features = true;
        d->stream = validation;
        if (dt_teacher_init(&d->teacher, (int)cfg->model.mlp.in_features, (int)cfg->model.mlp.out_features,
                            cfg->model.mlp.task == DT_TASK_REGRESSION, cfg->data.synthetic.noise,
                            (uint64_t)cfg->data.synthetic.seed) != 0) {
            dt_teacher_free(&d->teacher);
            return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the teacher source");
        }
        return DT_SUCCESS;
    }
    if (!cfg->data.train) {
        d->synthetic = true;
        d->stream = validation;
        dt_markov_init(&d->markov, (int)cfg->data.synthetic.order, (int)cfg->data.synthetic.alphabet,
                       (int)cfg->data.synthetic.support, (uint64_t)cfg->data.synthetic.seed);
        return DT_SUCCESS;
    }
    d->shuffle = !validation;
    const char *pattern = validation ? cfg->data.val : cfg->data.train;
    dt_status_t rc = open_files(d, pattern, validation ? "data.val" : "data.train", (int)cfg->model.vocab_size);
    if (rc != DT_SUCCESS) dt_dataset_close(d);
    return rc;
}

void dt_dataset_close(struct dt_dataset *d)
{
    for (int i = 0; i < d->nshards; i++) dt_shard_close(&d->shards[i]);
    free(d->shards);
    free(d->first_window);
    free(d->perm);
    dt_teacher_free(&d->teacher);
    *d = (struct dt_dataset){0};
}

size_t dt_dataset_windows(const struct dt_dataset *d) { return d->nwindows; }

void dt_dataset_features(struct dt_dataset *d, int64_t first, int B, float *x, int32_t *labels, float *y)
{
    dt_teacher_batch(&d->teacher, d->stream, first, B, x, labels, y);
}

static void make_perm(struct dt_dataset *d, int64_t epoch)
{
    for (size_t i = 0; i < d->nwindows; i++) d->perm[i] = i;
    struct dt_rng r = dt_rng_make(d->seed, 0xDA7A0000ull + (uint64_t)epoch);
    for (size_t i = d->nwindows - 1; i > 0; i--) {
        size_t j = (size_t)(dt_rng_u64(&r) % (i + 1));
        size_t t = d->perm[i];
        d->perm[i] = d->perm[j];
        d->perm[j] = t;
    }
    d->perm_epoch = epoch;
}

static void window(const struct dt_dataset *d, size_t w, int32_t *out)
{
    int lo = 0, hi = d->nshards - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (d->first_window[mid] <= w) lo = mid;
        else hi = mid - 1;
    }
    dt_shard_tokens(&d->shards[lo], (w - d->first_window[lo]) * (size_t)d->T, (size_t)d->T + 1, out);
}

void dt_dataset_batch(struct dt_dataset *d, int64_t first, int B, int32_t *out)
{
    for (int b = 0; b < B; b++) {
        int64_t n = first + b;
        int32_t *row = out + (size_t)b * (d->T + 1);
        if (d->synthetic) {
            dt_markov_sequence(&d->markov, d->stream, (uint64_t)n, row, d->T + 1);
            continue;
        }
        int64_t epoch = n / (int64_t)d->nwindows;
        size_t w = (size_t)(n % (int64_t)d->nwindows);
        if (d->shuffle) {
            if (epoch != d->perm_epoch) make_perm(d, epoch);
            w = d->perm[w];
        }
        window(d, w, row);
    }
}
