/* reference.h - the config reference (Markdown), generated from the schema table for README.md. */
#ifndef DT_REFERENCE_H
#define DT_REFERENCE_H

#include <stdio.h>

void dt_config_reference(FILE *out);

#endif
