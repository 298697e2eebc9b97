/* version.h - `dtrun --version`: version, configure options, compiled-in backends. */
#ifndef DT_VERSION_H
#define DT_VERSION_H

#include <stdio.h>

void dt_version_print(FILE *out);

#endif
