/* cuda_module_host.c - a CUDA module whose "device" is the host's memory, so that test_cuda_table can
 * drive kernels/cuda_table.c (the op table every GPU run goes through: its allocations' accounting, the
 * failures it keeps for synchronize, its copies) on a machine with no GPU. Only the memory, copy and
 * context ops are here, and one reduction, sumsq_parts (fp32 only), whose calls are counted: the
 * waits for the device a step's gradient check costs. What a test wants to fail is named in
 * DT_FAKE_CUDA_FAIL (a comma list of the ops above: malloc, memset, copies_create, copy_async,
 * sumsq_parts), read at each call, and the module's scratch (ctx_bytes) is DT_FAKE_CUDA_SCRATCH
 * bytes. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/dtype.h"
#include "dt_build_config.h"
#include "kernels/cuda/module.h"

/* the ops a test can make fail, each returning its own code (FAKE_ERR + its index), which error_string
 * names, so that the failure a table kept first is told from the ones after it */
enum { F_MALLOC, F_MEMSET, F_COPIES_CREATE, F_COPY_ASYNC, F_SUMSQ_PARTS };
static const char *const failing[] = {"malloc", "memset", "copies_create", "copy_async", "sumsq_parts"};
#define FAKE_ERR 900
#define FAKE_TOTAL ((size_t)1 << 30)

static long live;         /* device allocations not freed */
static long sumsq_calls;  /* sumsq_parts' calls: on a GPU, each waits for the device */
static size_t live_bytes; /* their bytes, for mem_info */

/* how many device allocations are live: test_cuda_table's leak check (dlsym) */
long dt_fake_cuda_live(void);
__attribute__((visibility("default"))) long dt_fake_cuda_live(void) { return live; }
/* how many times sumsq_parts was called (dlsym) */
long dt_fake_cuda_sumsq_calls(void);
__attribute__((visibility("default"))) long dt_fake_cuda_sumsq_calls(void) { return sumsq_calls; }

/* FAKE_ERR + i when DT_FAKE_CUDA_FAIL names op failing[i], else 0 */
static int fails(int i)
{
    const char *s = getenv("DT_FAKE_CUDA_FAIL");
    size_t n = strlen(failing[i]);
    for (const char *p = s; p && *p;) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !strncmp(p, failing[i], n)) return FAKE_ERR + i;
        p = e ? e + 1 : p + k;
    }
    return 0;
}

static const char *error_string(int e)
{
    static char buf[64];
    int i = e - FAKE_ERR, n = (int)(sizeof failing / sizeof failing[0]);
    if (i < 0 || i >= n) return "unknown error";
    snprintf(buf, sizeof buf, "fake %s failure", failing[i]);
    return buf;
}

/* the context holds nothing but the scratch's size, DT_FAKE_CUDA_SCRATCH, read at each call */
static int ctx_create(void **ctx)
{
    static int one;
    *ctx = &one;
    return 0;
}
static void ctx_destroy(void *ctx) { (void)ctx; }
static size_t ctx_bytes(void *ctx)
{
    (void)ctx;
    const char *s = getenv("DT_FAKE_CUDA_SCRATCH");
    return s ? (size_t)strtoull(s, NULL, 10) : 0;
}
static int set_device(int dev) { return dev == 0 ? 0 : 1; }
static void set_tries(unsigned flags) { (void)flags; }

/* each allocation carries its size in front, for mem_info */
static int dev_malloc(void **p, size_t bytes)
{
    *p = NULL;
    int e = fails(F_MALLOC);
    if (e) return e;
    size_t *b = malloc(sizeof(size_t) * 2 + bytes);
    if (!b) return 2;
    b[0] = bytes;
    *p = b + 2;
    live++;
    live_bytes += bytes;
    return 0;
}
static int dev_free(void *p)
{
    if (!p) return 0;
    size_t *b = (size_t *)p - 2;
    live--;
    live_bytes -= b[0];
    free(b);
    return 0;
}
static int host_malloc(void **p, size_t bytes)
{
    *p = malloc(bytes);
    return *p ? 0 : 2;
}
static int host_free(void *p)
{
    free(p);
    return 0;
}
static int dev_memset(void *p, int byte, size_t bytes)
{
    int e = fails(F_MEMSET);
    if (e) return e;
    memset(p, byte, bytes);
    return 0;
}
static int copy(void *dst, const void *src, size_t bytes)
{
    memmove(dst, src, bytes);
    return 0;
}
static int synchronize(void) { return 0; }

/* the copy stream: a copy is made at once, its ticket counts them */
static int copies_create(void **copies)
{
    static uint64_t next;
    *copies = NULL;
    int e = fails(F_COPIES_CREATE);
    if (e) return e;
    *copies = &next;
    return 0;
}
static void copies_destroy(void *copies) { (void)copies; }
static long async_copies;
/* how many copy_async copies were made (dlsym) */
long dt_fake_cuda_async_copies(void);
__attribute__((visibility("default"))) long dt_fake_cuda_async_copies(void) { return async_copies; }
static int copy_async(void *copies, void *dst, const void *src, size_t bytes, int kind, uint64_t *ticket)
{
    (void)kind;
    async_copies++;
    int e = fails(F_COPY_ASYNC);
    if (e) return e;
    memmove(dst, src, bytes);
    *ticket = (*(uint64_t *)copies)++;
    return 0;
}
/* copy_inline: made at once too, its tickets counted apart (marked by INLINE, as the module's) */
#define INLINE ((uint64_t)1 << 62)
static uint64_t inline_next;
static int copy_inline(void *copies, void *dst, const void *src, size_t bytes, int kind, uint64_t *ticket)
{
    (void)copies, (void)kind;
    memmove(dst, src, bytes);
    *ticket = inline_next++ | INLINE;
    return 0;
}
/* the waits on copies, host's and the ops', and the last ticket each waited for */
static long waits[2];
static uint64_t waited[2];
static int copy_wait(void *copies, uint64_t ticket, int host)
{
    waits[host != 0]++;
    waited[host != 0] = ticket;
    if (ticket & INLINE) return (ticket & ~INLINE) < inline_next ? 0 : 1;
    return ticket < *(uint64_t *)copies ? 0 : 1;
}
/* how many inline copies were made (dlsym) */
long dt_fake_cuda_inline_copies(void);
__attribute__((visibility("default"))) long dt_fake_cuda_inline_copies(void) { return (long)inline_next; }
/* test_cuda_table's view of them (dlsym): how many waits the host (host 1) or the ops (0) made, and
 * the ticket of the last */
long dt_fake_cuda_copy_waits(int host, uint64_t *last);
__attribute__((visibility("default"))) long dt_fake_cuda_copy_waits(int host, uint64_t *last)
{
    *last = waited[host != 0];
    return waits[host != 0];
}
/* fp32 parts only, np within module.h's bounds */
static int sumsq_parts(void *ctx, const struct dt_cuda_part *parts, int np, int t, double *sumsq, size_t *nonfinite)
{
    (void)ctx;
    sumsq_calls++;
    int e = fails(F_SUMSQ_PARTS);
    if (e) return e;
    if (t != (int)DT_F32 || np < 1 || np > DT_CUDA_PARTS_MAX) return 1;
    for (int i = 0; i < np; i++) {
        const float *x = parts[i].x;
        sumsq[i] = 0, nonfinite[i] = 0;
        for (size_t k = 0; k < parts[i].n; k++) sumsq[i] += (double)x[k] * x[k], nonfinite[i] += !isfinite(x[k]);
    }
    return 0;
}
static int mem_info(size_t *free_bytes, size_t *total_bytes)
{
    *total_bytes = FAKE_TOTAL;
    *free_bytes = FAKE_TOTAL - live_bytes;
    return 0;
}

static const struct dt_cuda_ops ops = {
    .error_string = error_string,
    .ctx_create = ctx_create,
    .ctx_destroy = ctx_destroy,
    .ctx_bytes = ctx_bytes,
    .set_device = set_device,
    .set_tries = set_tries,
    .malloc = dev_malloc,
    .free = dev_free,
    .malloc_host = host_malloc,
    .free_host = host_free,
    .memset = dev_memset,
    .to_device = copy,
    .to_host = copy,
    .on_device = copy,
    .synchronize = synchronize,
    .copies_create = copies_create,
    .copies_destroy = copies_destroy,
    .copy_async = copy_async,
    .copy_wait = copy_wait,
    .copy_inline = copy_inline,
    .mem_info = mem_info,
    .sumsq_parts = sumsq_parts,
};

static int device_count(char *why, size_t n)
{
    (void)why, (void)n;
    return 1;
}
static void describe(char *buf, size_t n) { snprintf(buf, n, "the host's memory (tests/unit/cuda_module_host.c)"); }

__attribute__((visibility("default"))) const struct dt_cuda_module dt_cuda_module = {
    .abi = DT_CUDA_MODULE_ABI, .version = PACKAGE_VERSION, .device_count = device_count, .describe = describe,
    .ops = &ops};
