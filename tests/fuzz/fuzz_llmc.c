/*
 * fuzz_llmc.c - llm.c weight files (model.init_from): the bytes as gpt2_124M.bin loaded by
 * dt_gpt_load_llmc into a tiny GPT (2 layers, 2 heads, 8 channels, vocabulary 16, 8
 * positions), which checks the 256-int header (magic, version, every dimension, the padded
 * vocabulary, longer contexts) and reads the parameters in llm.c's order. The model is made
 * once; a load that fails may leave it half-filled, which is all a failed load promises.
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
        if (dt_kernels_cpu.ctx_create(-1, &kc) != DT_SUCCESS || dt_gpt_create(&c, &dt_kernels_cpu, kc, 1, 8, &model))
            dt_fuzz_fail("cannot make the model");
        atexit(release);
    }
    char path[512];
    dt_fuzz_write("model.bin", data, size, path, sizeof path);
    dt_fuzz_begin();
    dt_fuzz_check_error(dt_gpt_load_llmc(model, path), "dt_gpt_load_llmc");
    return 0;
}
