/*
 * fuzz_ckpt.c - checkpoint rank files and the resharding reader (ckpt/load.c): the input
 * is the rank files one after another, each starting at its magic "DTCKPT1\n" (at most 8).
 * The target writes them into a checkpoint directory with a manifest that matches them
 * (sizes, XXH64s, the arrays of the first file's header, the elements of all headers
 * summed as the parameter count), so the fuzzer's bytes reach past the manifest: the
 * headers, the range tables, the cover check. A checkpoint that opens is read back by
 * dt_ckpt_read whole, element by element and in chunks of 3 and 7, which must agree
 * (reads cross the rank files' boundaries as a resume on another world does).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "ckpt/manifest.h"
#include "core/checksum.h"
#include "core/error.h"
#include "fuzz.h"

#define MAX_FILES 8
#define MAX_READ 4096 /* elements read back per array */

static const char magic[] = "DTCKPT1\n";

static uint64_t u64_at(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* every array read back in pieces of k elements, against the whole */
static void read_back(const struct dt_ckpt *c, int narrays, size_t nparams)
{
    size_t n = nparams < MAX_READ ? nparams : MAX_READ;
    float *whole = malloc(n * sizeof *whole + 1), *part = malloc(n * sizeof *part + 1);
    if (!whole || !part) dt_fuzz_fail("out of memory");
    for (int a = 0; a < narrays; a++) {
        dt_fuzz_begin();
        dt_status_t rc = dt_ckpt_read(c, a, 0, n, whole);
        dt_fuzz_check_error(rc, "dt_ckpt_read");
        if (rc != DT_SUCCESS) continue; /* a file changed under it: not here */
        static const size_t sizes[] = {1, 3, 7};
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            for (size_t off = 0; off < n; off += sizes[s]) {
                size_t k = n - off < sizes[s] ? n - off : sizes[s];
                if (dt_ckpt_read(c, a, off, k, part + off) != DT_SUCCESS)
                    dt_fuzz_fail("array %d: elements %zu..%zu do not read, the whole does: %s", a, off, off + k,
                                 dt_error_msg());
            }
            if (memcmp(whole, part, n * sizeof *whole))
                dt_fuzz_fail("array %d read in pieces of %zu differs from the whole", a, sizes[s]);
        }
    }
    /* past the end: refused, never read */
    dt_fuzz_begin();
    dt_status_t rc = dt_ckpt_read(c, 0, nparams, 1, whole);
    if (rc == DT_SUCCESS) dt_fuzz_fail("a read past the end of array 0 succeeds");
    dt_fuzz_check_error(rc, "dt_ckpt_read past the end");
    if (dt_ckpt_read(c, narrays, 0, 1, whole) == DT_SUCCESS) dt_fuzz_fail("an array past the last reads");
    free(whole);
    free(part);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char dir[512], path[600];
    dt_fuzz_path("step-00000007", dir, sizeof dir);
    mkdir(dir, 0700);
    /* the files: split at each magic */
    const uint8_t *start[MAX_FILES + 1];
    int n = 0;
    for (size_t i = 0; i + 8 <= size && n < MAX_FILES; i++)
        if (!memcmp(data + i, magic, 8)) start[n++] = data + i;
    start[n] = data + size;
    struct dt_ckpt_file files[MAX_FILES];
    struct dt_run_state m = {.step = 7, .opt_steps = 7, .samples = 56, .tokens = 448, .run_id = "fuzz",
                             .scaler = {.scale = 1}, .val_loss = 0.5, .loss = 1.5, .seed = 42, .config_hash = "0",
                             .model = "gpt", .optimizer = "adamw", .strategy = "zero1", .precision = "32-true",
                             .saved_at = "2026-01-01T00:00:00Z", .narrays = 1, .world = n > 0 ? n : 1};
    uint64_t elems = 0;
    for (int i = 0; i < n; i++) {
        size_t len = (size_t)(start[i + 1] - start[i]);
        snprintf(files[i].name, sizeof files[i].name, "rank-%05d-of-%05d.bin", i, n);
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(start[i], 1, len, f) != len || fclose(f) != 0) dt_fuzz_fail("cannot write %s", path);
        files[i].bytes = (int64_t)len;
        files[i].xxh64 = dt_xxh64(start[i], len, 0);
        if (len >= 64) {
            if (i == 0) {
                uint32_t arrays;
                memcpy(&arrays, start[i] + 20, sizeof arrays);
                m.narrays = arrays >= 1 && arrays <= 16 ? (int)arrays : 1;
            }
            elems += u64_at(start[i] + 32);
        }
    }
    m.nparams = elems >= 1 && elems < ((uint64_t)1 << 40) ? (int64_t)elems : 1;
    /* the files the last input left beyond these */
    for (int i = n; i < MAX_FILES; i++) {
        for (int of = 1; of <= MAX_FILES; of++) {
            snprintf(path, sizeof path, "%s/rank-%05d-of-%05d.bin", dir, i, of);
            unlink(path);
        }
    }
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (n == 0) {
        /* no rank file: the manifest names one that is not there */
        snprintf(files[0].name, sizeof files[0].name, "rank-00000-of-00001.bin");
        files[0].bytes = (int64_t)size;
        files[0].xxh64 = 0;
    }
    char *text = dt_manifest_text(&m, files, n > 0 ? n : 1);
    FILE *f = fopen(path, "w");
    if (!text || !f || fputs(text, f) < 0 || fclose(f) != 0) dt_fuzz_fail("cannot write %s", path);
    free(text);
    struct dt_ckpt *c;
    dt_fuzz_begin();
    dt_status_t rc = dt_ckpt_open(dir, true, &c);
    dt_fuzz_check_error(rc, "dt_ckpt_open");
    if (rc == DT_SUCCESS) {
        read_back(c, m.narrays, (size_t)m.nparams);
        dt_ckpt_close(c);
    }
    return 0;
}
