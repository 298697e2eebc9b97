/*
 * resolve_impl.h - what the passes of `auto` resolution share (resolve.c, init_from.c): whether the
 * user set a key, marking a key filled, and where a value came from for messages.
 */
#ifndef DT_RESOLVE_IMPL_H
#define DT_RESOLVE_IMPL_H

#include "config/config.h"
#include "config/diag.h"

/* written in the file, an override or the DeepSpeed JSON, and not as "auto" */
bool dt_resolve_user_set(const struct dt_config *cfg, const char *path);
/* path's value was derived: origin AUTO with this note (what `dtrun check` prints after "auto: ") */
void dt_resolve_set_auto(struct dt_config *cfg, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "config.yaml:3:5", "override 'model.n_layer=2'", "default" or "auto: ..." into buf */
const char *dt_resolve_where(const struct dt_config *cfg, const char *path, char *buf, size_t n);
/* where an error about path points: its place when the user wrote it, else dtrun itself */
struct dt_loc dt_resolve_loc(const struct dt_config *cfg, const char *path);

/* model.init_from's architecture into the model keys the config leaves unset (init_from.c) */
void dt_resolve_init_from(struct dt_config *cfg, struct dt_diags *d);
/* model.tokenizer left unset: the one data.train's prepare.json or model.init_from's directory has
 * (tokenizer_auto.c) */
void dt_resolve_tokenizer(struct dt_config *cfg);

#endif
