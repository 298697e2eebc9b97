/* thin.c - see thin.h. */
#include <math.h>
#include <stdbool.h>
#include "report/thin.h"

static long column(double x, double x0, double x1, int columns)
{
    double f = x1 > x0 ? (x - x0) / (x1 - x0) : 0;
    long c = (long)floor(f * columns);
    return c < 0 ? 0 : c >= columns ? columns - 1 : c;
}

size_t dt_thin(const double *x, const double *y, size_t n, double x0, double x1, int columns, bool positive_only,
               double *kx, double *ky)
{
    size_t kept = 0, lo = 0, hi = 0;
    long col = -1; /* the column being gathered, with its lowest (lo) and highest (hi) point */
    for (size_t i = 0; i <= n; i++) {
        bool usable = i < n && isfinite(x[i]) && isfinite(y[i]) && (!positive_only || y[i] > 0);
        if (i < n && !usable) continue;
        long c = i < n ? column(x[i], x0, x1, columns) : -2;
        if (c != col && col >= 0) { /* the column is done: its two points, in x order */
            size_t a = lo < hi ? lo : hi, b = lo < hi ? hi : lo;
            kx[kept] = x[a], ky[kept++] = y[a];
            if (b != a) kx[kept] = x[b], ky[kept++] = y[b];
        }
        if (i == n) break;
        if (c != col) col = c, lo = hi = i;
        else if (y[i] < y[lo]) lo = i;
        else if (y[i] > y[hi]) hi = i;
    }
    return kept;
}
