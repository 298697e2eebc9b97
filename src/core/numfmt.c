/* numfmt.c - see numfmt.h. */
#include <stdio.h>
#include <stdlib.h>
#include "core/numfmt.h"

const char *dt_fmt_float(float x, char *buf, size_t n)
{
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, n, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x) break;
    }
    return buf;
}

const char *dt_fmt_double(double x, char *buf, size_t n)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}
