/*
 * timestr.h - Composer-style durations and plain time spans.
 *
 * Durations (REFERENCE.md B6): a number and a unit, case-insensitive:
 *   ba (batches = optimizer steps), ep (epochs), sp (samples = sequences),
 *   tok (tokens), dur (fraction of run.max_duration; intervals only), and,
 *   where wall time is allowed (checkpoint.interval), sec, min or h (kept in
 *   seconds, as Composer's sec).
 * ba, sp and tok take a K, M, B/G or T multiplier: 5Mtok = 5,000,000 tokens.
 * Spans: 600s, 10m, 1h, 1d, 250ms, or a bare number of seconds.
 */
#ifndef DT_TIMESTR_H
#define DT_TIMESTR_H

#include <stddef.h>
#include "config/types.h"

/* 0 on success; otherwise why[] says what is wrong (units allowed: bitmask). */
int dt_duration_parse(const char *s, unsigned units, struct dt_duration *out, char *why, size_t n);
const char *dt_duration_str(struct dt_duration d, char *buf, size_t n);
const char *dt_time_unit_name(int unit);
int dt_seconds_parse(const char *s, double *out, char *why, size_t n);
/* A Slurm time limit (sbatch --time): MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or
 * UNLIMITED/INFINITE. 0 with *seconds (-1: unlimited), or -1. */
int dt_slurm_time_parse(const char *s, long *seconds);
const char *dt_seconds_str(double s, char *buf, size_t n);
/* Shortest "%.*g" text that reads back to exactly v. */
const char *dt_double_str(double v, char *buf, size_t n);

#endif
