/*
 * numfmt.h - numbers as the shortest decimal that reads back as the same value: what a file that
 * other programs read (config.json, Prometheus' text format, a checkpoint's model line) should say:
 * 1e-05 and 0.0003, not 9.99999975e-06 and 0.00029999999999999997.
 */
#ifndef DT_NUMFMT_H
#define DT_NUMFMT_H

#include <stddef.h>

/* x with 6 to 9 significant digits, the fewest that strtof reads back as x (6 at least, so that
 * 10000 and 500000 are written as numbers, not 1e+04); returns buf */
const char *dt_fmt_float(float x, char *buf, size_t n);
/* x with 15 to 17 significant digits, the fewest that strtod reads back as x */
const char *dt_fmt_double(double x, char *buf, size_t n);

#endif
