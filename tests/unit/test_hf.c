/*
 * test_hf.c - a Llama's weights through a Hugging Face model directory (ckpt/hf.h): exported and
 * imported to the same bits and the same loss, in one file and in shards with their index, in fp32
 * and bf16; config.json as transformers writes it; and the error that names every tensor that does not
 * fit the model at once (config.json against the config: test_init_from).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/hf.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/half.h"
#include "dt_test.h"
#include "train/shapes.h"

enum { B = 2, T = 8 };

/* grouped-query attention, its own LM head */
static const struct dt_llama_config shape = {.n_layer = 2, .n_head = 4, .n_kv_head = 2, .n_embd = 16,
                                             .intermediate_size = 24, .vocab_size = 37, .max_seq_len = T,
                                             .rms_eps = 1e-5f, .rope_theta = 10000, .activations = DT_F32};

static struct dt_model *made(const struct dt_llama_config *c, uint64_t seed)
{
    struct dt_model *m;
    assert_int_equal(dt_llama_create(c, &dt_kernels_cpu, dt_test_kctx(), B, T, &m), DT_SUCCESS);
    dt_test_own(m, NULL, seed);
    return m;
}

/* dir's weights into m's own buffers, through the source a rank reads its slices with */
static void load(struct dt_model *m, const char *dir)
{
    struct dt_param_source src;
    assert_int_equal(dt_hf_llama_source(m, dir, &src), DT_SUCCESS);
    assert_int_equal(dt_model_fill_own(m, &src), DT_SUCCESS);
    dt_source_close(&src);
}

static float loss_of(struct dt_model *m)
{
    int32_t tokens[B * (T + 1)];
    for (int i = 0; i < B * (T + 1); i++) tokens[i] = (i * 7 + 3) % 37;
    struct dt_batch b = {.B = B, .T = T, .tokens = tokens};
    return m->iface.forward(m, &b, 0.0f, NULL);
}

/* norms away from 1, so that a norm loaded as another tensor would show */
static struct dt_model *trained_looking(const struct dt_llama_config *c)
{
    struct dt_model *m = made(c, 7);
    for (size_t i = 0; i < m->nparams; i++) m->params[i] += 0.001f * (float)(i % 13);
    return m;
}

static int files_in(const char *dir, const char *suffix)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '%s$'", dir, suffix);
    FILE *p = popen(cmd, "r");
    int n = 0;
    assert_int_equal(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

static void round_trip(uint64_t shard_bytes, int shards)
{
    struct dt_model *a = trained_looking(&shape), *b = made(&shape, 0);
    assert_int_equal(dt_hf_save_llama(a, a->params, "hf", DT_F32, shard_bytes), DT_SUCCESS);
    assert_int_equal(files_in("hf", ".safetensors"), shards);
    assert_int_equal(files_in("hf", "index.json"), shards > 1);
    load(b, "hf");
    assert_memory_equal(b->params, a->params, a->nparams * sizeof(float));
    float la = loss_of(a), lb = loss_of(b);
    assert_memory_equal(&la, &lb, sizeof la); /* the same loss to the bit */
    dt_model_free(a);
    dt_model_free(b);
}

static void one_file(void **state) { round_trip(0, 1); }
/* about 8 KB a shard: the 2 x 37 x 16 embeddings and the blocks spread over several files */
static void sharded(void **state) { round_trip(8000, 3); }

/* bf16 on disk: every weight the nearest bf16, read back exactly */
static void bf16(void **state)
{
    struct dt_model *a = trained_looking(&shape), *b = made(&shape, 0);
    assert_int_equal(dt_hf_save_llama(a, a->params, "hf", DT_BF16, 0), DT_SUCCESS);
    load(b, "hf");
    for (size_t i = 0; i < a->nparams; i++)
        if (b->params[i] != dt_f32_from_bf16(dt_bf16_from_f32(a->params[i])))
            fail_msg("parameter %zu: %.9g, its bf16 %.9g", i, b->params[i],
                     dt_f32_from_bf16(dt_bf16_from_f32(a->params[i])));
    dt_model_free(a);
    dt_model_free(b);
}

/* a tied model has no lm_head.weight; config.json says so; Llama 3.2's scaled rotary frequencies
 * are written there and must be read back as they are */
static void tied(void **state)
{
    struct dt_llama_config c = shape;
    c.tie_embeddings = true;
    c.rope_scaling = (struct dt_rope_scaling){32, 1, 4, 8192};
    struct dt_model *a = trained_looking(&c), *b = made(&c, 0);
    assert_int_equal(dt_hf_save_llama(a, a->params, "hf", DT_F32, 0), DT_SUCCESS);
    struct dt_st_set *st;
    assert_int_equal(dt_st_open("hf", &st), DT_SUCCESS);
    assert_null(dt_st_find(st, "lm_head.weight"));
    assert_int_equal(dt_st_count(st), 2 + 9 * c.n_layer);
    dt_st_close(st);
    load(b, "hf");
    float la = loss_of(a), lb = loss_of(b);
    assert_memory_equal(&la, &lb, sizeof la);
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", NULL), DT_SUCCESS);
    assert_true(cfg.model.tie_embeddings);
    assert_int_equal(cfg.model.rope_scaling.type, DT_ROPE_LLAMA3);
    assert_true(cfg.model.rope_scaling.factor == 32 && cfg.model.rope_scaling.low_freq_factor == 1 &&
                cfg.model.rope_scaling.high_freq_factor == 4 &&
                cfg.model.rope_scaling.original_max_position_embeddings == 8192);
    dt_config_free(&cfg);
    dt_model_free(a);
    dt_model_free(b);
}

/* config.json says what the model is made for, as transformers writes it: its max_position_embeddings
 * (not the training length), floats as their shortest decimals (1e-06, not 9.99999997e-07); the
 * resolver reads back the same model (config/init_from.c) */
static void config_written(void **state)
{
    struct dt_llama_config c = shape;
    c.max_position = 4096, c.rms_eps = 1e-6f, c.rope_theta = 500000;
    struct dt_model *a = trained_looking(&c);
    assert_int_equal(dt_hf_save_llama(a, a->params, "hf", DT_F32, 0), DT_SUCCESS);
    FILE *f = fopen("hf/config.json", "r");
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    assert_non_null(strstr(text, "\"max_position_embeddings\": 4096,\n  \"rms_norm_eps\": 1e-06,\n  "
                                 "\"rope_theta\": 500000,"));
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", "model.seq_len=8", NULL), DT_SUCCESS);
    assert_int_equal(cfg.model.max_position_embeddings, 4096);
    struct dt_llama_config back;
    dt_shapes_llama(&cfg, DT_F32, &back);
    char la[512], lb[512];
    dt_llama_describe(&c, la, sizeof la);
    dt_llama_describe(&back, lb, sizeof lb);
    assert_string_equal(lb, la);
    assert_string_equal(la, "llama n_layer=2 n_head=4 n_kv_head=2 n_embd=16 intermediate_size=24 vocab_size=37 "
                            "seq_len=8 tie=0 norm_eps=1e-06 rope_theta=500000 rope_scaling=0,0,0,0 max_position=4096");
    /* a line written before it ended in max_position reads as max_position = seq_len */
    assert_true(dt_llama_parse("llama n_layer=2 n_head=4 n_kv_head=2 n_embd=16 intermediate_size=24 vocab_size=37 "
                               "seq_len=8 tie=0 norm_eps=1e-05 rope_theta=10000 rope_scaling=0,0,0,0", &back));
    assert_int_equal(back.max_position, 8);
    assert_true(back.rms_eps == 1e-5f);
    dt_config_free(&cfg);
    dt_model_free(a);
}

/* every tensor that is missing, misshapen or unknown, in one error */
static void tensor_mismatch(void **state)
{
    struct dt_model *a = trained_looking(&shape);
    assert_int_equal(dt_hf_save_llama(a, a->params, "hf", DT_F32, 0), DT_SUCCESS);
    struct dt_st_out t[64];
    int n = 0;
    for (int i = 0; i < a->nviews; i++) {
        const struct dt_param_view *v = &a->views[i];
        if (!strcmp(v->name, "model.norm.weight")) continue; /* missing */
        t[n] = (struct dt_st_out){v->name, v->ndim, {v->shape[0], v->shape[1]}, a->params + v->offset};
        if (!strcmp(v->name, "model.layers.1.self_attn.k_proj.weight")) t[n].shape[0] = 16, t[n].shape[1] = 4;
        n++;
    }
    t[n++] = (struct dt_st_out){"model.layers.2.mlp.up_proj.weight", 1, {4}, a->params};
    assert_int_equal(dt_st_write("hf", t, n, DT_F32, 0), DT_SUCCESS);
    struct dt_model *b = made(&shape, 0);
    struct dt_param_source src;
    assert_int_equal(dt_hf_llama_source(b, "hf", &src), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "hf: error: 3 tensors of the checkpoint do not fit the model:\n"
                                        "  model.layers.1.self_attn.k_proj.weight: [16, 4] in the checkpoint, [8, 16] "
                                        "in the model\n"
                                        "  model.norm.weight: absent from the checkpoint, [16] in the model\n"
                                        "  model.layers.2.mlp.up_proj.weight: in the checkpoint, not a parameter of the "
                                        "model\n"
                                        "  hint: the names and shapes are Hugging Face LlamaForCausalLM's; check model.* "
                                        "against config.json");
    dt_model_free(a);
    dt_model_free(b);
}

DT_TESTS(T(one_file), T(sharded), T(bf16), T(tied), T(config_written), T(tensor_mismatch))
