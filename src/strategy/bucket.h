/*
 * bucket.h - DDP's gradient buckets: the model's gradient segments taken in
 * the order backward finishes them, cut into buckets of at most cap elements
 * (PyTorch DDP's bucket_cap_mb; a segment larger than the cap is split, which
 * also keeps each message in the size range where Open MPI is fastest here,
 * PERF.md). A bucket can all-reduce once backward has finished its last group.
 */
#ifndef DT_BUCKET_H
#define DT_BUCKET_H

#include <stddef.h>
#include "core/status.h"
#include "model/model.h"

struct dt_bucket {
    const struct dt_grad_seg *pieces; /* into the plan's pieces */
    int npieces;
    size_t numel;
    int ready_group; /* the bucket is final once backward has finished this group */
};

struct dt_bucket_plan {
    struct dt_grad_seg *pieces; /* group = the segment's group */
    struct dt_bucket *b;
    int n, npieces;
};

/* Plan buckets of at most cap elements over m's segments (the whole gradient as one
 * segment when the model lists none). */
dt_status_t dt_bucket_plan(const struct dt_model *m, size_t cap, struct dt_bucket_plan *p);
void dt_bucket_plan_free(struct dt_bucket_plan *p);

#endif
