/*
 * fuzz_manifest.c - checkpoint manifests: the bytes as step-N/manifest.json, read by
 * dt_manifest_read (through the config's YAML/JSON reader: the format and version, the
 * run's counters, every file's name, size and checksum) and opened by dt_ckpt_open, whose
 * rank files are missing (or, where the manifest names manifest.json itself, wrong). A
 * manifest that reads must be written again by dt_manifest_text to text that reads back to
 * the same counters and files.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt/ckpt.h"
#include "ckpt/manifest.h"
#include "core/error.h"
#include "fuzz.h"

static bool same_num(double a, double b) { return a == b || (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-8 * fabs(a); }

/* what the manifest carries, written and read again */
static void reads_back(const char *dir2, const struct dt_run_state *m, const struct dt_ckpt_file *files, int nfiles)
{
    char *text = dt_manifest_text(m, files, nfiles), path[600];
    if (!text) dt_fuzz_fail("dt_manifest_text: out of memory");
    snprintf(path, sizeof path, "%s/manifest.json", dir2);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) dt_fuzz_fail("cannot write %s", path);
    struct dt_run_state b;
    struct dt_ckpt_file *bf;
    int nb;
    dt_fuzz_begin();
    if (dt_manifest_read(dir2, &b, &bf, &nb) != DT_SUCCESS)
        dt_fuzz_fail("a manifest that reads, written again, does not read back: %s\n%s", dt_error_msg(), text);
    if (b.step != m->step || b.opt_steps != m->opt_steps || b.samples != m->samples || b.tokens != m->tokens ||
        b.nparams != m->nparams || b.narrays != m->narrays || b.stage != m->stage || b.world != m->world ||
        b.restart != m->restart || b.seed != m->seed || b.scaler.cur_hysteresis != m->scaler.cur_hysteresis ||
        b.scaler.cur_iter != m->scaler.cur_iter || b.scaler.last_overflow_iter != m->scaler.last_overflow_iter ||
        b.scaler.skipped != m->scaler.skipped || !same_num(b.loss, m->loss) || !same_num(b.val_loss, m->val_loss) ||
        !same_num(b.scaler.scale, m->scaler.scale))
        dt_fuzz_fail("a manifest's counters change when written and read back:\n%s", text);
    if (nb != nfiles) dt_fuzz_fail("%d files, %d after writing and reading back", nfiles, nb);
    for (int i = 0; i < nb; i++)
        if (strcmp(bf[i].name, files[i].name) || bf[i].bytes != files[i].bytes || bf[i].xxh64 != files[i].xxh64)
            dt_fuzz_fail("file %d (%s) changes when written and read back:\n%s", i, files[i].name, text);
    free(bf);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char dir[512], dir2[512], path[600];
    dt_fuzz_path("step-00000010", dir, sizeof dir);
    dt_fuzz_path("step-00000020", dir2, sizeof dir2);
    mkdir(dir, 0700);
    mkdir(dir2, 0700);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) dt_fuzz_fail("cannot write %s", path);
    struct dt_run_state m;
    struct dt_ckpt_file *files;
    int nfiles;
    dt_fuzz_begin();
    dt_status_t rc = dt_manifest_read(dir, &m, &files, &nfiles);
    dt_fuzz_check_error(rc, "dt_manifest_read");
    if (rc == DT_SUCCESS) {
        if (nfiles < 1 || !files) dt_fuzz_fail("a manifest read without files");
        reads_back(dir2, &m, files, nfiles);
        free(files);
    }
    struct dt_ckpt *c;
    dt_fuzz_begin();
    rc = dt_ckpt_open(dir, true, &c);
    dt_fuzz_check_error(rc, "dt_ckpt_open");
    dt_ckpt_close(rc == DT_SUCCESS ? c : NULL);
    return 0;
}
