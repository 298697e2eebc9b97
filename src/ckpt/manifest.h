/*
 * manifest.h - a checkpoint's manifest.json (ckpt.h), written and read: the
 * format and version, the run's counters and identity, and each rank file's
 * size and checksum. Internal to src/ckpt.
 */
#ifndef DT_CKPT_MANIFEST_H
#define DT_CKPT_MANIFEST_H

#include "ckpt/ckpt.h"

/* The manifest's text (malloc'd). */
char *dt_manifest_text(const struct dt_run_state *m, const struct dt_ckpt_file *files, int nfiles);
/* Read path/manifest.json: *files malloc'd. A missing or unreadable manifest, or another format,
 * is an error naming the file. */
dt_status_t dt_manifest_read(const char *dir, struct dt_run_state *m, struct dt_ckpt_file **files, int *nfiles);

#endif
