/*
 * types.h - value types, origins and the schema table shape shared by the dtrun
 * config (config.h) and the DeepSpeed JSON (deepspeed.h).
 */
#ifndef DT_CONFIG_TYPES_H
#define DT_CONFIG_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include "config/ynode.h"

/* Composer time units (REFERENCE.md B6): 2000ba, 3ep, 100000sp, 5Mtok, 0.1dur. */
enum dt_time_unit { DT_TU_BA, DT_TU_EP, DT_TU_SP, DT_TU_TOK, DT_TU_DUR, DT_TU_SEC };
#define DT_UNITS_TRAIN ((1u << DT_TU_BA) | (1u << DT_TU_EP) | (1u << DT_TU_SP) | (1u << DT_TU_TOK))
#define DT_UNITS_INTERVAL (DT_UNITS_TRAIN | (1u << DT_TU_DUR))
/* checkpoints: also wall time (Composer's sec; 30min and 2h read as seconds) */
#define DT_UNITS_WALL (DT_UNITS_INTERVAL | (1u << DT_TU_SEC))

struct dt_duration {
    double value; /* a whole number for ba, sp and tok */
    int unit;     /* enum dt_time_unit */
};

#define DT_FLOATS_MAX 8
struct dt_floats {
    int n;
    double v[DT_FLOATS_MAX];
};

enum dt_origin_kind { DT_ORIGIN_DEFAULT, DT_ORIGIN_FILE, DT_ORIGIN_OVERRIDE, DT_ORIGIN_DEEPSPEED, DT_ORIGIN_AUTO };

struct dt_origin {
    enum dt_origin_kind kind;
    struct dt_loc loc;  /* FILE, OVERRIDE, DEEPSPEED: where the value was written */
    bool is_auto;       /* written as "auto": resolve fills it */
    char note[160];     /* AUTO: how the value was derived */
};

/* fvcore's CompositeParamScheduler phases (REFERENCE.md B4), values as multiples of optimizer.lr. */
#define DT_PHASES_MAX 8
enum dt_phase_type { DT_PHASE_CONSTANT, DT_PHASE_LINEAR, DT_PHASE_COSINE };
enum dt_phase_scaling { DT_SCALING_RESCALED, DT_SCALING_FIXED };
struct dt_phase {
    int type, scaling;
    double start, end, length;
};
struct dt_phases {
    int n;
    struct dt_phase p[DT_PHASES_MAX];
};

/* Owned copies of the file names and labels that origins point into. */
struct dt_namelist {
    char **names;
    size_t n;
};
const char *dt_namelist_add(struct dt_namelist *l, const char *name);
void dt_namelist_free(struct dt_namelist *l);

enum dt_type {
    DT_T_BOOL,
    DT_T_INT,      /* int64_t */
    DT_T_FLOAT,    /* double */
    DT_T_STR,      /* char *, owned */
    DT_T_ENUM,     /* int, from a dt_enum_name table */
    DT_T_DURATION, /* struct dt_duration */
    DT_T_SECONDS,  /* double: 600s, 10m, 1h, 250ms or a plain number of seconds */
    DT_T_FLOATS,   /* struct dt_floats */
    DT_T_ANY,      /* any value, stored nowhere (DeepSpeed sections dtrun ignores) */
    DT_T_PHASES,   /* struct dt_phases: a list of {type, start, end, length, scaling} */
};

/* An accepted spelling. The first entry of a value is its canonical name; a
 * negative value refuses the spelling with `note` as the reason. */
struct dt_enum_name {
    const char *name;
    int value;
    const char *note;
};

#define DT_F_NULLABLE 1u /* null allowed (strings) */
#define DT_F_AUTO 2u     /* "auto" allowed: resolve fills it */
#define DT_F_MIN_EXCL 4u /* must be > min, not >= min */
#define DT_F_CREDENTIALS 8u /* a URL that may carry user:password@: shown with them masked */

/* How a DeepSpeed key meets the dtrun key it corresponds to (deepspeed.c). */
enum dt_ds_policy {
    DT_DS_NONE,     /* dtrun key of its own (not DeepSpeed) */
    DT_DS_MATCH,    /* "auto" takes the dtrun value; a different explicit value is a mismatch */
    DT_DS_BATCH,    /* like MATCH, completed by DeepSpeed's batch-size fill rules */
    DT_DS_WIN,      /* the JSON value wins over the dtrun default; an explicit dtrun value that differs is noted */
    DT_DS_STORE,    /* kept in struct dt_ds_config for the strategy that reads it */
    DT_DS_IGNORED,  /* accepted, but dtrun does not implement it yet: warned about by name */
};

struct dt_key {
    const char *path;
    enum dt_type type;
    size_t offset;
    const char *def; /* default as YAML text; NULL: null (nullable) or zero */
    double min, max; /* numeric range, inclusive unless DT_F_MIN_EXCL */
    const struct dt_enum_name *names;
    unsigned flags;
    unsigned units; /* DT_T_DURATION: allowed units */
    int count;      /* DT_T_FLOATS: exact element count, 0 = 1..DT_FLOATS_MAX */
    const char *help;
    const char *maps_to; /* DeepSpeed: the dtrun key path it corresponds to */
    enum dt_ds_policy policy;
};

struct dt_schema {
    const char *what; /* "dtrun config" or "DeepSpeed config", for messages */
    const struct dt_key *keys;
    size_t n;
};

#endif
