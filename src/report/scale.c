/* scale.c - see scale.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "report/scale.h"

#define TARGET_TICKS 5

/* the round step nearest to raw from above: 1, 2 or 5 times a power of ten */
static double nice_step(double raw)
{
    double p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* the 1-2-5 value at or below v (down) or at or above it (up), v > 0 */
static double round125(double v, bool up)
{
    static const double m[] = {1, 2, 5, 10};
    double p = pow(10, floor(log10(v)));
    if (!up) {
        double best = p;
        for (int i = 0; i < 3; i++)
            if (m[i] * p <= v * (1 + 1e-12)) best = m[i] * p;
        return best;
    }
    for (int i = 0; i < 4; i++)
        if (m[i] * p >= v * (1 - 1e-12)) return m[i] * p;
    return 10 * p;
}

bool dt_scale_fit(struct dt_scale *s, enum dt_scale_kind kind, double lo, double hi, double p0, double p1)
{
    if (!isfinite(lo) || !isfinite(hi) || lo > hi) return false;
    if (kind == DT_SCALE_LOG) {
        if (hi <= 0) return false;
        if (lo <= 0) lo = hi / 10;
        if (lo == hi) lo /= 2, hi *= 2;
        double r = hi / lo;
        if (r >= 100) { /* decades */
            lo = pow(10, floor(log10(lo) + 1e-9));
            hi = pow(10, ceil(log10(hi) - 1e-9));
        } else if (r >= 4) {
            lo = round125(lo, false);
            hi = round125(hi, true);
        } else { /* a narrow range reads best with the linear axis' round steps */
            double step = nice_step((hi - lo) / TARGET_TICKS);
            double l = floor(lo / step) * step;
            lo = l > 0 ? l : lo * 0.9;
            hi = ceil(hi / step) * step;
        }
    } else {
        if (lo == hi) {
            double d = lo == 0 ? 1 : fabs(lo) * 0.1;
            lo -= d, hi += d;
        }
        double step = nice_step((hi - lo) / TARGET_TICKS);
        lo = floor(lo / step + 1e-9) * step;
        hi = ceil(hi / step - 1e-9) * step;
    }
    *s = (struct dt_scale){.kind = kind, .lo = lo, .hi = hi, .p0 = p0, .p1 = p1};
    return true;
}

double dt_scale_px(const struct dt_scale *s, double v)
{
    if (!isfinite(v) || (s->kind == DT_SCALE_LOG && v <= 0)) return NAN;
    double f = s->kind == DT_SCALE_LOG ? log(v / s->lo) / log(s->hi / s->lo) : (v - s->lo) / (s->hi - s->lo);
    return s->p0 + f * (s->p1 - s->p0);
}

int dt_scale_ticks(const struct dt_scale *s, double *ticks, int max, double *step)
{
    int n = 0;
    *step = 0;
    if (s->kind == DT_SCALE_LOG && s->hi / s->lo >= 4) {
        double decades = log10(s->hi / s->lo);
        if (decades >= 2) { /* every decade, or every k-th when there are many */
            int every = (int)ceil(decades / (max - 1));
            for (double e = ceil(log10(s->lo) - 1e-9); e <= log10(s->hi) + 1e-9 && n < max; e += every)
                ticks[n++] = pow(10, e);
            return n;
        }
        static const double m[] = {1, 2, 5};
        for (double p = pow(10, floor(log10(s->lo))); p <= s->hi && n < max; p *= 10)
            for (int i = 0; i < 3 && n < max; i++)
                if (m[i] * p >= s->lo * (1 - 1e-9) && m[i] * p <= s->hi * (1 + 1e-9)) ticks[n++] = m[i] * p;
        return n;
    }
    double st = nice_step((s->hi - s->lo) / TARGET_TICKS);
    for (double k = ceil(s->lo / st - 1e-9); k * st <= s->hi + st * 1e-9 && n < max; k++) {
        double v = k * st;
        ticks[n++] = fabs(v) < st * 1e-9 ? 0 : v;
    }
    *step = st;
    return n;
}

void dt_scale_label(double v, double step, char *buf, size_t n)
{
    static const char *const suffix[] = {"", "k", "M", "G", "T"};
    int k = 0;
    double scale = 1;
    while (k < 4 && fabs(v) >= scale * 1000 * (1 - 1e-9)) k++, scale *= 1000;
    double sv = v / scale, sstep = step / scale;
    if (fabs(sv) >= 1000) { /* past the last suffix: plain exponents */
        snprintf(buf, n, "%.3g", v);
    } else if (v == 0) {
        snprintf(buf, n, "0");
    } else if (step > 0 && (k > 0 || step >= 1e-4)) {
        int dec = sstep >= 1 ? 0 : (int)ceil(-log10(sstep) - 1e-9);
        snprintf(buf, n, "%.*f%s", dec > 6 ? 6 : dec, sv, suffix[k]);
    } else {
        snprintf(buf, n, "%.3g%s", sv, suffix[k]);
        /* 3e-05 -> 3e-5: a label is read, not parsed */
        char *e = strstr(buf, "e-0");
        if (e) memmove(e + 2, e + 3, strlen(e + 3) + 1);
    }
}
