/*
 * safetensors.h - Hugging Face's safetensors checkpoints, read and written tensor by tensor,
 * knowing nothing of any model (model.init_from and `dtrun ckpt export` give the names).
 *
 * A file: an 8-byte little-endian length N, N bytes of JSON header
 *     {"__metadata__": {str: str}, "NAME": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}, ...}
 * (spaces pad it so the data starts 8-byte aligned), then the data: tensor NAME is bytes [b, e)
 * after the header, row-major, little-endian. A checkpoint directory holds model.safetensors, or
 * shards model-00001-of-0000M.safetensors and model.safetensors.index.json
 *     {"metadata": {"total_size": BYTES}, "weight_map": {"NAME": "model-00001-of-0000M.safetensors", ...}}.
 * Headers are parsed by config/ynode.h (JSON is YAML); the data is read with pread straight into
 * the caller's buffer, never a whole file into memory. Every malformed header, offset or index is
 * an error naming the file, the tensor and the byte offsets, with a hint.
 */
#ifndef DT_CKPT_SAFETENSORS_H
#define DT_CKPT_SAFETENSORS_H

#include <stdint.h>
#include "core/dtype.h"
#include "core/status.h"

#define DT_ST_MAX_DIMS 4

struct dt_st_tensor {
    const char *name;
    enum dt_dtype dtype; /* DT_F32, DT_BF16 or DT_F16 */
    int ndim;            /* 0 (a scalar) to DT_ST_MAX_DIMS */
    int64_t shape[DT_ST_MAX_DIMS];
    int64_t numel;
    int file;            /* which of the set's files holds it */
    uint64_t offset;     /* byte offset of its first element in that file */
};

/* every tensor of a checkpoint, over its shards */
struct dt_st_set;

/* path: a directory holding model.safetensors (preferred, as transformers does) or
 * model.safetensors.index.json and its shards; an index file; or one .safetensors file. */
dt_status_t dt_st_open(const char *path, struct dt_st_set **out);
/* NULL: no tensor of that name */
const struct dt_st_tensor *dt_st_find(const struct dt_st_set *s, const char *name);
/* the tensors in name order, i in [0, dt_st_count) */
int dt_st_count(const struct dt_st_set *s);
const struct dt_st_tensor *dt_st_at(const struct dt_st_set *s, int i);
/* t's numel values into dst as fp32 (bf16 and fp16 widen exactly) */
dt_status_t dt_st_read_f32(struct dt_st_set *s, const struct dt_st_tensor *t, float *dst);
/* n values from t's element first on (row-major: a range of rows is one run of bytes), read with one
 * pread of just those bytes: a rank reads the slice it keeps */
dt_status_t dt_st_read_range_f32(struct dt_st_set *s, const struct dt_st_tensor *t, int64_t first, size_t n,
                                 float *dst);
/* bytes of tensor data read so far */
uint64_t dt_st_bytes_read(const struct dt_st_set *s);
void dt_st_close(struct dt_st_set *s);

struct dt_st_out {
    const char *name;
    int ndim;
    int64_t shape[DT_ST_MAX_DIMS];
    const float *data; /* host fp32, the product of shape values */
};

/* dir (created if need be)/model.safetensors, or, when the tensors' bytes pass max_shard_bytes (0:
 * no limit), shards of at most that much each (a bigger tensor alone in its shard) and
 * model.safetensors.index.json; each file written under a temporary name, then renamed. Tensors are
 * stored as dtype (DT_F32, or rounded to nearest even DT_BF16 / DT_F16) in the order given, with
 * __metadata__ {"format": "pt"}, which transformers requires. */
dt_status_t dt_st_write(const char *dir, const struct dt_st_out *t, int n, enum dt_dtype dtype,
                        uint64_t max_shard_bytes);

#endif
