/* bucket.c - see bucket.h. */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "strategy/bucket.h"

/* segments by group, ties in the model's order */
static int by_group(const void *a, const void *b)
{
    const struct dt_grad_seg *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

dt_status_t dt_bucket_plan(const struct dt_model *m, size_t cap, struct dt_bucket_plan *p)
{
    *p = (struct dt_bucket_plan){0};
    if (cap < 1) cap = 1;
    struct dt_grad_seg whole = {0, m->nparams, 0};
    int nsegs = m->nsegs ? m->nsegs : 1;
    struct dt_grad_seg *segs = malloc((size_t)nsegs * sizeof *segs);
    size_t maxp = (size_t)nsegs + m->nparams / cap + 2;
    p->pieces = malloc(maxp * sizeof *p->pieces);
    p->b = malloc(maxp * sizeof *p->b);
    if (!segs || !p->pieces || !p->b) {
        free(segs);
        dt_bucket_plan_free(p);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory planning gradient buckets");
    }
    memcpy(segs, m->nsegs ? m->segs : &whole, (size_t)nsegs * sizeof *segs);
    qsort(segs, (size_t)nsegs, sizeof *segs, by_group);
    size_t total = 0;
    struct dt_bucket *cur = NULL;
    for (int i = 0; i < nsegs; i++) {
        total += segs[i].numel;
        size_t off = segs[i].offset, left = segs[i].numel;
        while (left > 0) {
            if (!cur || cur->numel == cap) {
                cur = &p->b[p->n++];
                *cur = (struct dt_bucket){.pieces = &p->pieces[p->npieces]};
            }
            size_t take = cap - cur->numel < left ? cap - cur->numel : left;
            struct dt_grad_seg *last = cur->npieces ? &p->pieces[p->npieces - 1] : NULL;
            if (last && last->offset + last->numel == off) {
                last->numel += take; /* contiguous with the previous piece: one copy, or none */
                last->group = segs[i].group;
            } else {
                p->pieces[p->npieces++] = (struct dt_grad_seg){off, take, segs[i].group};
                cur->npieces++;
            }
            cur->numel += take;
            cur->ready_group = segs[i].group;
            off += take;
            left -= take;
        }
    }
    free(segs);
    if (total != m->nparams) {
        dt_bucket_plan_free(p);
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: the model's gradient segments cover %zu of its %zu "
                        "parameters\n  hint: this is a bug in the model's segment list", total, m->nparams);
    }
    return DT_SUCCESS;
}

void dt_bucket_plan_free(struct dt_bucket_plan *p)
{
    free(p->pieces);
    free(p->b);
    *p = (struct dt_bucket_plan){0};
}
