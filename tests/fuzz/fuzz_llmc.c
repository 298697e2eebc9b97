/*
 * fuzz_llmc.c - llm.c weight files (model.init_from): the bytes as gpt2_124M.bin opened by
 * dt_gpt_llmc_source for a tiny GPT (2 layers, 2 heads, 8 channels, vocabulary 16, 8 positions),
 * which checks the 256-int header (magic, version, every dimension, the padded vocabulary, longer
 * contexts, the file's length), then every parameter read, in two ranges as two ranks would. The
 * model is made once, with its own buffers; a load that fails may leave them half-filled, which
 * is all a failed load promises.
 */
#include <stdlib.h>
#include "fuzz.h"
#include "kernels/kernels.h"
#include "model/gpt.h"

static struct dt_kctx *kc;
static struct dt_model *model;

static void release(void)
{
    dt_model_free(model);
    dt_kernels_cpu.ctx_destroy(kc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model) {
        struct dt_gpt_config c = {.n_layer = 2, .n_head = 2, .n_embd = 8, .vocab_size = 16, .max_seq_len = 8,
                                  .activations = DT_F32};
        if (dt_kernels_cpu.ctx_create(-1, &kc) != DT_SUCCESS || dt_gpt_create(&c, &dt_kernels_cpu, kc, 1, 8, &model) ||
            dt_model_own_buffers(model))
            dt_fuzz_fail("cannot make the model");
        atexit(release);
    }
    char path[512];
    dt_fuzz_write("model.bin", data, size, path, sizeof path);
    dt_fuzz_begin();
    struct dt_param_source src;
    dt_status_t rc = dt_gpt_llmc_source(model, path, &src);
    size_t half = model->nparams / 2;
    if (rc == DT_SUCCESS) {
        rc = src.fill(src.ctx, half, model->nparams - half, model->params + half);
        if (rc == DT_SUCCESS) rc = src.fill(src.ctx, 0, half, model->params);
        dt_source_close(&src);
    }
    dt_fuzz_check_error(rc, "dt_gpt_llmc_source");
    return 0;
}
