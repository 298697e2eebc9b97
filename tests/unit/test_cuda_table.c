/*
 * test_cuda_table.c - kernels/cuda_table.c, the op table every GPU run goes through, on any machine:
 * over tests/unit/cuda_module_host.c, a CUDA module whose device memory is the host's (its
 * DT_FAKE_CUDA_FAIL makes the ops it names fail, DT_FAKE_CUDA_SCRATCH is its scratch). Checked:
 *   - device_memory's peak is the most held at once, the module's scratch included (#41 item 5), not
 *     the sum of the allocations' peak and the scratch's; a copy between overlapping ranges counts
 *     its temporary;
 *   - a failure is kept, with its op, for synchronize to report with the step and the device, once;
 *   - an allocation whose zeroing fails is given back (the module's live count), not leaked;
 *   - copy_async without its copy stream still copies (in order with the kernels) and the failure
 *     is reported;
 *   - a micro-batch's tokens go up through the model's two stages in turn (lm_head.c), among the
 *     ops, not on the copy stream; the host waits only for a stage's copy two micro-batches back;
 *   - a step's gradient check (sumsq_parts) waits for the device once per DT_CUDA_PARTS_MAX parts,
 *     not once a part, and adds the squares of the parts that count them in order;
 *   - DTRUN_CUDA_TRY's unknown name refused at the context's creation, with every name.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dt_test.h"
#include "kernels/cuda/module.h"
#include "kernels/kernels.h"
#include "model/lm_head.h"

static struct dt_kctx *ctx(void)
{
    struct dt_kctx *kc = NULL;
    assert_int_equal(dt_kernels_cuda.ctx_create(0, &kc), DT_SUCCESS);
    return kc;
}

/* one of the fake module's counts: dt_fake_cuda_live, dt_fake_cuda_sumsq_calls */
static long fake_count(const char *name)
{
    void *h = dlopen(getenv("DTRUN_CUDA_MODULE"), RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    long (*f)(void) = (long (*)(void))dlsym(h, name);
    assert_non_null(f);
    long n = f();
    dlclose(h);
    return n;
}

/* the fake module's count of live device allocations */
static long live(void) { return fake_count("dt_fake_cuda_live"); }

static int64_t peak(struct dt_kctx *kc)
{
    int64_t p, reserved;
    dt_kernels_cuda.device_memory(kc, &p, &reserved);
    return p;
}

static void peak_is_what_was_held_at_once(void **state)
{
    (void)state;
    setenv("DT_FAKE_CUDA_SCRATCH", "0", 1);
    struct dt_kctx *kc = ctx();
    void *a = dt_kernels_cuda.alloc(kc, 1000);
    assert_non_null(a);
    assert_int_equal(peak(kc), 1000);
    dt_kernels_cuda.free(kc, a);
    /* the scratch grows after a is gone: 1000 was the most at once, not 1000 + 500 */
    setenv("DT_FAKE_CUDA_SCRATCH", "500", 1);
    void *b = dt_kernels_cuda.alloc(kc, 100);
    assert_int_equal(peak(kc), 1000);
    void *c = dt_kernels_cuda.alloc(kc, 1000);
    assert_int_equal(peak(kc), 100 + 1000 + 500);
    /* an overlapping copy on the device goes through a temporary of its size */
    dt_kernels_cuda.copy(kc, (char *)c + 10, c, 600, DT_COPY_ON_DEVICE);
    assert_int_equal(peak(kc), 100 + 1000 + 500 + 600);
    int64_t p, reserved;
    dt_kernels_cuda.device_memory(kc, &p, &reserved);
    assert_int_equal(reserved, 1100); /* the fake's total less its free: its live bytes */
    dt_kernels_cuda.free(kc, b);
    dt_kernels_cuda.free(kc, c);
    assert_int_equal(live(), 0);
    assert_int_equal(dt_kernels_cuda.synchronize(kc, 1), DT_SUCCESS);
    dt_kernels_cuda.ctx_destroy(kc);
    unsetenv("DT_FAKE_CUDA_SCRATCH");
}

static void failed_zeroing_leaks_nothing(void **state)
{
    (void)state;
    struct dt_kctx *kc = ctx();
    setenv("DT_FAKE_CUDA_FAIL", "memset", 1);
    assert_null(dt_kernels_cuda.alloc(kc, 4096));
    unsetenv("DT_FAKE_CUDA_FAIL");
    assert_int_equal(live(), 0);
    assert_int_equal(peak(kc), 0);
    assert_int_equal(dt_kernels_cuda.synchronize(kc, 7), DT_ERR_CUDA);
    assert_string_equal(dt_error_msg(), "dtrun: error: step 7: CUDA op alloc failed on cuda:0: fake memset failure\n"
                                        "  hint: rerun with CUDA_LAUNCH_BLOCKING=1 to stop at the failing launch");
    /* reported once: the next step starts clean */
    assert_int_equal(dt_kernels_cuda.synchronize(kc, 8), DT_SUCCESS);
    dt_kernels_cuda.ctx_destroy(kc);
}

static void copy_async_without_its_stream(void **state)
{
    (void)state;
    struct dt_kctx *kc = ctx();
    float host[64], back[64];
    for (int i = 0; i < 64; i++) host[i] = (float)i + 0.5f;
    float *dev = dt_kernels_cuda.alloc(kc, sizeof host);
    assert_non_null(dev);
    uint64_t t = dt_kernels_cuda.copy_async(kc, dev, host, sizeof host, DT_COPY_TO_DEVICE);
    assert_int_not_equal(t, UINT64_MAX);
    dt_kernels_cuda.copy_wait(kc, t, false);
    dt_kernels_cuda.copy(kc, back, dev, sizeof back, DT_COPY_TO_HOST);
    assert_memory_equal(back, host, sizeof host);
    assert_int_equal(dt_kernels_cuda.synchronize(kc, 1), DT_SUCCESS);
    dt_kernels_cuda.free(kc, dev);
    dt_kernels_cuda.ctx_destroy(kc);

    /* a fresh context whose copy stream cannot be made: the copy is still made, the failure said */
    kc = ctx();
    dev = dt_kernels_cuda.alloc(kc, sizeof host);
    memset(back, 0, sizeof back);
    setenv("DT_FAKE_CUDA_FAIL", "copies_create", 1);
    t = dt_kernels_cuda.copy_async(kc, dev, host, sizeof host, DT_COPY_TO_DEVICE);
    unsetenv("DT_FAKE_CUDA_FAIL");
    assert_int_equal(t, UINT64_MAX);
    dt_kernels_cuda.copy_wait(kc, t, true);
    dt_kernels_cuda.copy(kc, back, dev, sizeof back, DT_COPY_TO_HOST);
    assert_memory_equal(back, host, sizeof host);
    assert_int_equal(dt_kernels_cuda.synchronize(kc, 3), DT_ERR_CUDA);
    assert_non_null(strstr(dt_error_msg(), "step 3: CUDA op copy_async failed on cuda:0: fake copies_create failure"));
    dt_kernels_cuda.free(kc, dev);
    assert_int_equal(live(), 0);
    dt_kernels_cuda.ctx_destroy(kc);
}

/* the fake module's waits on copies: how many the host (host true) or the ops made, the last's ticket */
static long copy_waits(bool host, uint64_t *last)
{
    void *h = dlopen(getenv("DTRUN_CUDA_MODULE"), RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    long (*f)(int, uint64_t *) = (long (*)(int, uint64_t *))dlsym(h, "dt_fake_cuda_copy_waits");
    assert_non_null(f);
    long n = f(host, last);
    dlclose(h);
    return n;
}

/* Three micro-batches of B 2, T 3 through dt_lm_tokens_in: each lands whole (inputs, then targets
 * one token on) in one copy among the ops (copy_inline: never on the copy stream, where it would
 * queue behind the offloaded state's copies); the host waits before it refills a stage, for that
 * stage's last copy (the first micro-batch's, at the third), and at the end for both; the ops wait
 * for nothing */
static void tokens_go_up_staged(void **state)
{
    (void)state;
    enum { B = 2, T = 3 };
    struct dt_model m = {.k = &dt_kernels_cuda, .kc = ctx()};
    struct dt_lm_mem a = {0};
    assert_int_equal(dt_lm_mem_alloc(&m, &a, 64, B, T), DT_SUCCESS);
    uint64_t last, first_ticket = DT_NO_TICKET;
    long host0 = copy_waits(true, &last), ops0 = copy_waits(false, &last);
    long inline0 = fake_count("dt_fake_cuda_inline_copies"), async0 = fake_count("dt_fake_cuda_async_copies");
    for (int micro = 0; micro < 3; micro++) {
        int32_t tokens[B * (T + 1)], back[2 * B * T];
        for (int i = 0; i < B * (T + 1); i++) tokens[i] = 100 * micro + i;
        dt_lm_tokens_in(&m, &a, &(struct dt_batch){.B = B, .T = T, .tokens = tokens}, B, T);
        dt_kernels_cuda.copy(m.kc, back, a.inputs, sizeof back, DT_COPY_TO_HOST);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                assert_int_equal(back[b * T + t], tokens[b * (T + 1) + t]);
                assert_int_equal(back[B * T + b * T + t], tokens[b * (T + 1) + t + 1]);
            }
        if (micro == 0) first_ticket = a.staged[0];
        assert_int_equal(fake_count("dt_fake_cuda_inline_copies") - inline0, micro + 1);
        assert_int_equal(copy_waits(true, &last) - host0, micro < 2 ? 0 : 1);
    }
    assert_int_not_equal(first_ticket, DT_NO_TICKET);
    assert_int_equal(last, first_ticket);
    assert_int_equal(copy_waits(false, &last) - ops0, 0);
    assert_int_equal(fake_count("dt_fake_cuda_async_copies") - async0, 0);
    dt_lm_mem_free(&m, &a);
    assert_int_equal(copy_waits(true, &last) - host0, 3);
    assert_int_equal(live(), 0);
    assert_int_equal(dt_kernels_cuda.synchronize(m.kc, 1), DT_SUCCESS);
    dt_kernels_cuda.ctx_destroy(m.kc);
}

/* 130 parts: two calls of the module (128 and 2), the squares of every other part added in order
 * (2^54 first, then 1s that each round away: in another order they would add up), the inf/nan of all
 * counted; a failing call reported once, with its op */
static void gradient_check_waits_once(void **state)
{
    (void)state;
    enum { NP = DT_CUDA_PARTS_MAX + 2 };
    struct dt_kctx *kc = ctx();
    float *g = dt_kernels_cuda.alloc(kc, NP * 2 * sizeof *g);
    float host[NP * 2];
    struct dt_norm_part parts[NP];
    double want = 0;
    for (int i = 0; i < NP; i++) {
        host[2 * i] = i ? 1.0f : 134217728.0f, host[2 * i + 1] = 0.0f; /* 2^27, squared 2^54 */
        parts[i] = (struct dt_norm_part){g + 2 * i, 2, i % 2 == 0};
        if (i % 2 == 0) want += (double)host[2 * i] * host[2 * i];
    }
    assert_true(want == 18014398509481984.0); /* 2^54: the 64 ones each rounded away */
    host[3] = INFINITY, host[2 * NP - 1] = NAN; /* in part 1, which is not summed, and in the last */
    dt_kernels_cuda.copy(kc, g, host, sizeof host, DT_COPY_TO_DEVICE);
    long before = fake_count("dt_fake_cuda_sumsq_calls");
    size_t bad = 0;
    double s = dt_kernels_cuda.sumsq_parts(kc, parts, NP, DT_F32, &bad);
    assert_int_equal(fake_count("dt_fake_cuda_sumsq_calls") - before, 2);
    assert_true(s == want);
    assert_int_equal(bad, 2);
    assert_int_equal(dt_kernels_cuda.synchronize(kc, 1), DT_SUCCESS);
    setenv("DT_FAKE_CUDA_FAIL", "sumsq_parts", 1);
    dt_kernels_cuda.sumsq_parts(kc, parts, NP, DT_F32, &bad);
    unsetenv("DT_FAKE_CUDA_FAIL");
    assert_int_equal(dt_kernels_cuda.synchronize(kc, 4), DT_ERR_CUDA);
    assert_non_null(strstr(dt_error_msg(), "step 4: CUDA op sumsq_parts failed on cuda:0: fake sumsq_parts failure"));
    assert_int_equal(dt_kernels_cuda.synchronize(kc, 5), DT_SUCCESS);
    dt_kernels_cuda.free(kc, g);
    dt_kernels_cuda.ctx_destroy(kc);
}

static void unknown_trial_refused(void **state)
{
    (void)state;
    setenv("DTRUN_CUDA_TRY", "dq2,nosuch", 1);
    struct dt_kctx *kc = NULL;
    dt_status_t rc = dt_kernels_cuda.ctx_create(0, &kc);
    unsetenv("DTRUN_CUDA_TRY");
    assert_int_equal(rc, DT_ERR_CONFIG);
    assert_null(kc);
    const char *msg = dt_error_msg();
    assert_non_null(strstr(msg, "dtrun: error: DTRUN_CUDA_TRY names \"nosuch\", no kernel on trial\n  hint: a "
                                "comma-separated list of xent2, "));
    assert_non_null(strstr(msg, ", kv1, "));
    assert_non_null(strstr(msg, ", or all; unset it for the kernels in use"));
}

int main(void)
{
    /* the fake module, before the first context loads a module */
    setenv("DTRUN_CUDA_MODULE", DT_FAKE_CUDA_MODULE, 1);
    unsetenv("DTRUN_CUDA_TRY");
    const struct CMUnitTest tests[] = {T(peak_is_what_was_held_at_once), T(failed_zeroing_leaks_nothing),
                                       T(copy_async_without_its_stream), T(tokens_go_up_staged),
                                       T(gradient_check_waits_once),
                                       T(unknown_trial_refused)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
