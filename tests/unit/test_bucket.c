/* test_bucket.c - DDP's bucket plan: ready order, the cap, splitting, contiguous merging, full coverage. */
#include <stdlib.h>
#include "dt_test.h"
#include "core/error.h"
#include "model/gpt.h"
#include "strategy/bucket.h"

/* a model with only what the planner reads */
static struct dt_model fake(const struct dt_grad_seg *segs, int n, size_t nparams)
{
    return (struct dt_model){.segs = segs, .nsegs = n, .nparams = nparams};
}

static void ready_order_and_cap(void **state)
{
    (void)state;
    /* listed out of order; group 0 is finished first; 20..29 follows 10..19 in memory */
    const struct dt_grad_seg segs[] = {{0, 10, 2}, {10, 10, 0}, {20, 10, 0}, {30, 25, 1}};
    struct dt_model m = fake(segs, 4, 55);
    struct dt_bucket_plan p;
    assert_int_equal(dt_bucket_plan(&m, 16, &p), DT_SUCCESS);
    /* group 0 = [10,30) cut at 16; then group 1's 25 split; then group 2 */
    assert_int_equal(p.n, 4);
    assert_int_equal(p.b[0].numel, 16);
    assert_int_equal(p.b[0].npieces, 1); /* 10..19 and 20..25 merged: one copy-free piece */
    assert_int_equal(p.b[0].pieces[0].offset, 10);
    assert_int_equal(p.b[0].ready_group, 0);
    assert_int_equal(p.b[1].numel, 16);
    assert_int_equal(p.b[1].npieces, 1); /* 26..29 of group 0 and 30..41 of group 1 touch: one piece */
    assert_int_equal(p.b[1].pieces[0].offset, 26);
    assert_int_equal(p.b[1].pieces[0].numel, 16);
    assert_int_equal(p.b[1].ready_group, 1);
    assert_int_equal(p.b[2].numel, 16); /* 42..54 of group 1, then 0..2 of group 2: two pieces */
    assert_int_equal(p.b[2].npieces, 2);
    assert_int_equal(p.b[2].pieces[1].offset, 0);
    assert_int_equal(p.b[2].pieces[1].numel, 3);
    assert_int_equal(p.b[2].ready_group, 2);
    assert_int_equal(p.b[3].numel, 7);
    size_t total = 0;
    for (int i = 0; i < p.n; i++) total += p.b[i].numel;
    assert_int_equal(total, 55);
    dt_bucket_plan_free(&p);
}

static void whole_buffer_without_segments(void **state)
{
    (void)state;
    struct dt_model m = fake(NULL, 0, 100);
    struct dt_bucket_plan p;
    assert_int_equal(dt_bucket_plan(&m, 1000, &p), DT_SUCCESS);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.b[0].numel, 100);
    assert_int_equal(p.b[0].npieces, 1);
    dt_bucket_plan_free(&p);
}

static void segments_must_cover_the_model(void **state)
{
    (void)state;
    const struct dt_grad_seg segs[] = {{0, 10, 0}};
    struct dt_model m = fake(segs, 1, 11);
    struct dt_bucket_plan p;
    assert_int_equal(dt_bucket_plan(&m, 4, &p), DT_ERR_INTERNAL);
    assert_string_equal(dt_error_msg(), "dtrun: error: the model's gradient segments cover 10 of its 11 parameters\n"
                                        "  hint: this is a bug in the model's segment list");
}

/* The GPT lists every parameter once, in backward's order: wte (after the LM head), lnf, layers from
 * the last, wpe. */
static void gpt_segments(void **state)
{
    (void)state;
    struct dt_gpt_config c = {3, 2, 8, 11, 5, false, false, DT_F32};
    struct dt_model *m;
    assert_int_equal(dt_gpt_create(&c, &dt_kernels_cpu, 2, 5, &m), DT_SUCCESS);
    assert_int_equal(m->ngroups, 6);
    char *seen = calloc(m->nparams, 1);
    int last = 0;
    for (int i = 0; i < m->nsegs; i++) {
        assert_true(m->segs[i].group >= last);
        last = m->segs[i].group;
        for (size_t j = 0; j < m->segs[i].numel; j++) seen[m->segs[i].offset + j]++;
    }
    for (size_t j = 0; j < m->nparams; j++) assert_int_equal(seen[j], 1);
    assert_string_equal(m->views[0].name, "wte");
    assert_int_equal(m->segs[0].offset, m->views[0].offset);
    assert_int_equal(m->segs[0].numel, m->views[0].numel);
    assert_string_equal(m->views[m->nviews - 2].name, "lnfw");
    assert_int_equal(m->segs[1].offset, m->views[m->nviews - 2].offset);
    assert_string_equal(m->views[1].name, "wpe");
    assert_int_equal(m->segs[m->nsegs - 1].offset, m->views[1].offset);
    free(seen);
    dt_model_free(m);
}

DT_TESTS(cmocka_unit_test(ready_order_and_cap), cmocka_unit_test(whole_buffer_without_segments),
         cmocka_unit_test(segments_must_cover_the_model), cmocka_unit_test(gpt_segments))
