/*
 * fuzz.h - what the libFuzzer targets in tests/fuzz/ share (fuzz.c).
 *
 * Each target is one file, tests/fuzz/fuzz_<name>.c, defining only
 * LLVMFuzzerTestOneInput: it hands the bytes to dtrun's real entry point for one
 * input format. A failing status is an expected outcome (the target returns 0);
 * a crash, a sanitizer report, a leak, a hang or an abort() from one of the
 * targets' own checks (an error without a message, output that does not read
 * back) is a finding. Built two ways (tests/fuzz/fuzz.am):
 *   tests/fuzz/fuzz_<name>    libFuzzer's main; `scripts/fuzz` runs them (CC=clang, --enable-fuzz)
 *   tests/fuzz/replay_<name>  replay.c's main: the seed corpus and the regressions, in `make check`
 */
#ifndef DT_FUZZ_H
#define DT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Once per process: a private temporary directory (removed at exit), log level ERROR unless DTRUN_DEBUG
 * says otherwise, no site config or SPANK variables from the environment. Returns the directory. */
const char *dt_fuzz_init(void);
/* The full name of name inside that directory. */
const char *dt_fuzz_path(const char *name, char *path, size_t n);
/* Write bytes to name inside that directory; path gets the full name. Aborts when the disk refuses. */
void dt_fuzz_write(const char *name, const void *data, size_t size, char *path, size_t n);
/* The bytes as a NUL-terminated string (malloc'd; an embedded NUL ends it early). */
char *dt_fuzz_str(const uint8_t *data, size_t size);
/* Before calling an entry point: no message left from the input before. */
void dt_fuzz_begin(void);
/* After it: a failure must come with a message (DESIGN.md invariant 3); aborts otherwise. */
void dt_fuzz_check_error(dt_status_t rc, const char *what);
/* Abort with a message naming the target's broken property. */
void dt_fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

struct dt_config;
struct dt_geometry;
/* A resolved config printed as `dtrun check` prints it, read back and resolved again against the same
 * geometry: it must load, resolve and hold the same value in every key (what README promises). Aborts
 * otherwise. */
void dt_fuzz_config_reads_back(const struct dt_config *a, const struct dt_geometry *geo);

#endif
