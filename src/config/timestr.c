/* timestr.c - see timestr.h. */
#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "config/timestr.h"

static const char *const unit_names[] = {"ba", "ep", "sp", "tok", "dur", "sec"};

const char *dt_time_unit_name(int unit) { return unit >= 0 && unit <= DT_TU_SEC ? unit_names[unit] : "?"; }

const char *dt_double_str(double v, char *buf, size_t n)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, n, "%.1f", v);
        return buf;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* keep a float looking like one, so YAML readers do not take it for an int */
    if (!strpbrk(buf, ".eEn") && strlen(buf) + 2 < n) strcat(buf, ".0");
    return buf;
}

static void units_list(unsigned units, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int u = 0; u <= DT_TU_SEC; u++) {
        if (!(units & (1u << u))) continue;
        if (buf[0]) strncat(buf, ", ", n - strlen(buf) - 1);
        strncat(buf, u == DT_TU_SEC ? "sec, min, h" : unit_names[u], n - strlen(buf) - 1);
    }
}

int dt_duration_parse(const char *s, unsigned units, struct dt_duration *out, char *why, size_t n)
{
    char allowed[64];
    units_list(units, allowed, sizeof allowed);
    size_t len = strlen(s);
    size_t ulen = 0;
    while (ulen < len && isalpha((unsigned char)s[len - 1 - ulen])) ulen++;
    /* "1e3ba": the 'e' belongs to the number when a digit precedes it */
    char unit[16];
    if (ulen == 0 || ulen >= sizeof unit) {
        snprintf(why, n, "'%s' needs a unit (%s), e.g. 2000ba or 2ep", s, allowed);
        return -1;
    }
    for (size_t i = 0; i < ulen; i++) unit[i] = (char)tolower((unsigned char)s[len - ulen + i]);
    unit[ulen] = '\0';
    double mult = 1;
    const char *base = unit;
    if (strchr("kmbgt", unit[0]) && (!strcmp(unit + 1, "tok") || !strcmp(unit + 1, "sp") || !strcmp(unit + 1, "ba"))) {
        mult = unit[0] == 'k' ? 1e3 : unit[0] == 'm' ? 1e6 : unit[0] == 't' ? 1e12 : 1e9;
        base = unit + 1;
    }
    int u = -1;
    for (int i = 0; i <= DT_TU_SEC; i++)
        if (!strcmp(base, unit_names[i])) u = i;
    bool wall = !strcmp(base, "s") || !strcmp(base, "min") || !strcmp(base, "h");
    if (wall) { /* wall time, kept in seconds */
        mult = base[0] == 'h' ? 3600 : base[0] == 'm' ? 60 : 1;
        u = DT_TU_SEC;
    }
    if (u < 0) {
        snprintf(why, n, "'%s' has an unknown unit '%s'; use %s", s, unit, allowed);
        return -1;
    }
    if (u == DT_TU_SEC && !(units & (1u << u))) {
        snprintf(why, n, "'%s': wall-clock durations are not training time; use %s", s, allowed);
        return -1;
    }
    if (!(units & (1u << u))) {
        snprintf(why, n, "'%s': the unit %s is not allowed here; use %s", s, unit_names[u], allowed);
        return -1;
    }
    char num[64];
    size_t nlen = len - ulen;
    if (nlen == 0 || nlen >= sizeof num) {
        snprintf(why, n, "'%s' needs a number before the unit, e.g. 2000%s", s, unit_names[u]);
        return -1;
    }
    memcpy(num, s, nlen);
    num[nlen] = '\0';
    char *end;
    errno = 0;
    double v = strtod(num, &end);
    if (*end || end == num || !isfinite(v) || errno == ERANGE) {
        snprintf(why, n, "'%s': '%s' is not a number", s, num);
        return -1;
    }
    v *= mult;
    if (!isfinite(v)) { /* 1e306h: finite as written, not in seconds (#16, tests/fuzz/fuzz_timestr.c) */
        snprintf(why, n, "'%s' is too large", s);
        return -1;
    }
    if (v < 0) {
        snprintf(why, n, "'%s' is negative", s);
        return -1;
    }
    if ((u == DT_TU_BA || u == DT_TU_SP || u == DT_TU_TOK) && (v != floor(v) || v > 9007199254740992.0)) {
        snprintf(why, n, "'%s' must be a whole number of %s", s,
                 u == DT_TU_BA ? "batches" : u == DT_TU_SP ? "samples" : "tokens");
        return -1;
    }
    out->value = v;
    out->unit = u;
    return 0;
}

const char *dt_duration_str(struct dt_duration d, char *buf, size_t n)
{
    /* wall time too: 0.5s printed with "%.0f" read back as 0sec (#16, tests/fuzz/fuzz_timestr.c) */
    if (d.unit == DT_TU_EP || d.unit == DT_TU_DUR || d.unit == DT_TU_SEC) {
        char num[40];
        dt_double_str(d.value, num, sizeof num);
        size_t l = strlen(num);
        if (l > 2 && !strcmp(num + l - 2, ".0")) num[l - 2] = '\0';
        snprintf(buf, n, "%s%s", num, unit_names[d.unit]);
    } else {
        snprintf(buf, n, "%.0f%s", d.value, dt_time_unit_name(d.unit));
    }
    return buf;
}

int dt_seconds_parse(const char *s, double *out, char *why, size_t n)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || errno == ERANGE) {
        snprintf(why, n, "'%s' is not a time span; write e.g. 600s, 10m or 1h", s);
        return -1;
    }
    double mult = 0;
    if (!*end || !strcmp(end, "s")) mult = 1;
    else if (!strcmp(end, "ms")) mult = 1e-3;
    else if (!strcmp(end, "m") || !strcmp(end, "min")) mult = 60;
    else if (!strcmp(end, "h")) mult = 3600;
    else if (!strcmp(end, "d")) mult = 86400;
    if (mult == 0) {
        snprintf(why, n, "'%s' has an unknown unit '%s'; use ms, s, m, h or d", s, end);
        return -1;
    }
    if (v < 0) {
        snprintf(why, n, "'%s' is negative", s);
        return -1;
    }
    if (!isfinite(v * mult)) { /* 1e306h (#16) */
        snprintf(why, n, "'%s' is too large", s);
        return -1;
    }
    *out = v * mult;
    return 0;
}

const char *dt_seconds_str(double s, char *buf, size_t n)
{
    char num[40];
    dt_double_str(s, num, sizeof num);
    size_t l = strlen(num);
    if (l > 2 && !strcmp(num + l - 2, ".0")) num[l - 2] = '\0';
    snprintf(buf, n, "%ss", num);
    return buf;
}

/* up to 4 numbers separated by ':' (after an optional "D-"); -1 on anything else */
static int slurm_fields(const char *s, long *v, int max)
{
    int n = 0;
    for (;;) {
        if (!isdigit((unsigned char)*s) || n == max) return -1;
        char *end;
        long x = strtol(s, &end, 10);
        if (end - s > 9) return -1;
        v[n++] = x;
        if (*end == '\0') return n;
        if (*end != ':') return -1;
        s = end + 1;
    }
}

int dt_slurm_time_parse(const char *s, long *seconds)
{
    if (!strcasecmp(s, "UNLIMITED") || !strcasecmp(s, "INFINITE")) {
        *seconds = -1;
        return 0;
    }
    long v[3], days = 0;
    const char *dash = strchr(s, '-');
    if (dash) {
        char *end;
        if (!isdigit((unsigned char)*s)) return -1;
        days = strtol(s, &end, 10);
        if (end != dash || end - s > 6) return -1;
        int n = slurm_fields(dash + 1, v, 3); /* D-HH, D-HH:MM, D-HH:MM:SS */
        if (n < 1) return -1;
        *seconds = days * 86400 + v[0] * 3600 + (n > 1 ? v[1] * 60 : 0) + (n > 2 ? v[2] : 0);
        return 0;
    }
    int n = slurm_fields(s, v, 3); /* MM, MM:SS, HH:MM:SS */
    if (n < 1) return -1;
    *seconds = n == 1 ? v[0] * 60 : n == 2 ? v[0] * 60 + v[1] : v[0] * 3600 + v[1] * 60 + v[2];
    return 0;
}
