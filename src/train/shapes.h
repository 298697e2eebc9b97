/*
 * shapes.h - the config's model and optimizer as the model and optimizer
 * layers take them: what the trainer builds, and what dtrun check --memory
 * sizes without building anything.
 */
#ifndef DT_SHAPES_H
#define DT_SHAPES_H

#include <stdio.h>
#include "config/config.h"
#include "model/gpt.h"
#include "model/llama.h"
#include "model/mlp.h"
#include "optim/optimizer.h"

void dt_shapes_gpt(const struct dt_config *cfg, enum dt_dtype activations, struct dt_gpt_config *gc);
void dt_shapes_llama(const struct dt_config *cfg, enum dt_dtype activations, struct dt_llama_config *lc);
void dt_shapes_mlp(const struct dt_config *cfg, struct dt_mlp_config *mc);
void dt_shapes_optim(const struct dt_config *cfg, struct dt_optim_config *oc);
/* The model's shape in one line, as checkpoints record it: two configs that build parameters of the
 * same layout describe the same. */
void dt_shapes_describe(const struct dt_config *cfg, char *buf, size_t n);
/* The model's parameter count, as `dtrun check` shows it: "# parameters: 8,030,261,248 (8.03B), llama ..." */
dt_status_t dt_shapes_print(const struct dt_config *cfg, FILE *out);
/* The model's units (malloc'd). */
dt_status_t dt_shapes_units(const struct dt_config *cfg, struct dt_unit **units, int *n);

#endif
