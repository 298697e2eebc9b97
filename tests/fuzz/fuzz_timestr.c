/*
 * fuzz_timestr.c - duration and time-span strings (config/timestr.c): the bytes after the
 * first as a Composer duration (2000ba, 3ep, 5Mtok, 0.1dur, 30min) under the unit set the
 * first byte picks, as a time span (600s, 250ms, 1h), and as a Slurm time limit (1-12:00).
 * What parses must print back (dt_duration_str, dt_seconds_str) to text that parses to the
 * same value, since `dtrun check` prints and reads them; and the first 8 bytes as a double
 * must survive dt_double_str (the shortest text that reads back exactly).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "config/timestr.h"
#include "fuzz.h"

static const unsigned unit_sets[] = {DT_UNITS_TRAIN, DT_UNITS_INTERVAL, DT_UNITS_WALL, 1u << DT_TU_BA, 0x3f};

static void duration(const char *s, unsigned units)
{
    struct dt_duration d, back;
    char why[512], text[128], why2[512];
    if (dt_duration_parse(s, units, &d, why, sizeof why) != 0) {
        if (!why[0]) dt_fuzz_fail("dt_duration_parse refused '%s' without saying why", s);
        return;
    }
    if (!isfinite(d.value) || d.value < 0) dt_fuzz_fail("dt_duration_parse took '%s' as %g", s, d.value);
    dt_duration_str(d, text, sizeof text);
    if (dt_duration_parse(text, units, &back, why2, sizeof why2) != 0)
        dt_fuzz_fail("'%s' parses, but its printed form '%s' does not: %s", s, text, why2);
    if (back.unit != d.unit || back.value != d.value)
        dt_fuzz_fail("'%s' is %.17g %s, printed '%s', read back as %.17g %s", s, d.value, dt_time_unit_name(d.unit),
                     text, back.value, dt_time_unit_name(back.unit));
}

static void seconds(const char *s)
{
    double v, back;
    char why[512], text[128], why2[512];
    if (dt_seconds_parse(s, &v, why, sizeof why) != 0) {
        if (!why[0]) dt_fuzz_fail("dt_seconds_parse refused '%s' without saying why", s);
        return;
    }
    if (!isfinite(v)) dt_fuzz_fail("dt_seconds_parse took '%s' as %g", s, v);
    dt_seconds_str(v, text, sizeof text);
    if (dt_seconds_parse(text, &back, why2, sizeof why2) != 0)
        dt_fuzz_fail("'%s' parses, but its printed form '%s' does not: %s", s, text, why2);
    if (back != v) dt_fuzz_fail("'%s' is %.17g s, printed '%s', read back as %.17g s", s, v, text, back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    dt_fuzz_init();
    char *s = dt_fuzz_str(data + 1, size - 1);
    duration(s, unit_sets[data[0] % (sizeof unit_sets / sizeof unit_sets[0])]);
    seconds(s);
    long sec;
    if (dt_slurm_time_parse(s, &sec) == 0 && sec < -1) dt_fuzz_fail("dt_slurm_time_parse took '%s' as %ld s", s, sec);
    free(s);
    if (size >= 9) {
        double v, back;
        char text[64];
        memcpy(&v, data + 1, sizeof v);
        if (isfinite(v)) {
            dt_double_str(v, text, sizeof text);
            back = strtod(text, NULL);
            if (back != v || signbit(back) != signbit(v))
                dt_fuzz_fail("dt_double_str(%.17g) is '%s', which reads back as %.17g", v, text, back);
        }
    }
    return 0;
}
