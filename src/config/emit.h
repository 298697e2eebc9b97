/* emit.h - print a resolved config as YAML that dt_config_load reads back to the same values. */
#ifndef DT_EMIT_H
#define DT_EMIT_H

#include <stdio.h>
#include "config/config.h"

void dt_config_emit(const struct dt_config *cfg, FILE *out);

#endif
