/*
 * test_init_from.c - model.init_from fixes the architecture (config/init_from.c): a Hugging Face
 * directory's config.json and an llm.c model file's header fill every model key the config leaves
 * unset, each marked "auto: model.init_from PATH"; a key the user set that disagrees is an error
 * naming both values and both places; what the file asks for that dtrun does not compute is refused
 * with its place in the file, all before anything is built.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/error.h"
#include "dt_test.h"

/* Llama 3.2 1B's config.json as transformers writes it, with rms_norm_eps 1e-06 */
static const char *llama32 =
    "{\n"
    "  \"architectures\": [\"LlamaForCausalLM\"],\n"
    "  \"model_type\": \"llama\",\n"
    "  \"hidden_size\": 2048,\n"
    "  \"intermediate_size\": 8192,\n"
    "  \"num_hidden_layers\": 16,\n"
    "  \"num_attention_heads\": 32,\n"
    "  \"num_key_value_heads\": 8,\n"
    "  \"head_dim\": 64,\n"
    "  \"vocab_size\": 128256,\n"
    "  \"max_position_embeddings\": 131072,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_theta\": 500000.0,\n"
    "  \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0,\n"
    "    \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"},\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"attention_bias\": false,\n"
    "  \"mlp_bias\": false,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\"\n"
    "}\n";

static void hf_dir(const char *json)
{
    mkdir("hf", 0755);
    dt_test_write("hf/config.json", json);
}

/* json with the first `from` replaced by `to` */
static void hf_dir_with(const char *from, const char *to)
{
    char text[4096];
    const char *at = strstr(llama32, from);
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - llama32), llama32, to, at + strlen(from));
    hf_dir(text);
}

static void fills_every_key(void **state)
{
    hf_dir(llama32);
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, "model: {init_from: hf}\n", NULL), DT_SUCCESS);
    assert_int_equal(cfg.model.type, DT_MODEL_LLAMA);
    assert_int_equal(cfg.model.n_layer, 16);
    assert_int_equal(cfg.model.n_embd, 2048);
    assert_int_equal(cfg.model.n_head, 32);
    assert_int_equal(cfg.model.n_kv_head, 8);
    assert_int_equal(cfg.model.intermediate_size, 8192);
    assert_int_equal(cfg.model.vocab_size, 128256);
    assert_int_equal(cfg.model.max_position_embeddings, 131072);
    assert_true(cfg.model.norm_eps == 1e-6);
    assert_true(cfg.model.rope_theta == 500000);
    assert_true(cfg.model.tie_embeddings);
    assert_int_equal(cfg.model.rope_scaling.type, DT_ROPE_LLAMA3);
    assert_true(cfg.model.rope_scaling.factor == 32 && cfg.model.rope_scaling.low_freq_factor == 1 &&
                cfg.model.rope_scaling.high_freq_factor == 4);
    assert_int_equal(cfg.model.rope_scaling.original_max_position_embeddings, 8192);
    /* trained at the context it was pretrained on, not its scaled 131072 */
    assert_int_equal(cfg.model.seq_len, 8192);
    assert_string_equal(dt_config_origin(&cfg, "model.seq_len")->note,
                        "model.init_from hf (rope_scaling.original_max_position_embeddings)");
    static const char *const keys[] = {"model.type", "model.n_layer", "model.n_embd", "model.n_head",
                                       "model.n_kv_head", "model.intermediate_size", "model.vocab_size",
                                       "model.norm_eps", "model.rope_theta", "model.tie_embeddings",
                                       "model.max_position_embeddings", "model.rope_scaling.type",
                                       "model.rope_scaling.factor"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const struct dt_origin *o = dt_config_origin(&cfg, keys[i]);
        assert_int_equal(o->kind, DT_ORIGIN_AUTO);
        assert_string_equal(o->note, "model.init_from hf");
    }
    dt_config_free(&cfg);
    /* the example of #38: only seq_len set; and keys set to the file's values are fine */
    assert_int_equal(dt_test_config(&cfg, NULL, "model: {type: llama, init_from: hf, seq_len: 40, n_layer: 16, "
                                    "norm_eps: 1.0e-6}\n", NULL), DT_SUCCESS);
    assert_int_equal(cfg.model.seq_len, 40);
    assert_int_equal(cfg.model.n_kv_head, 8);
    dt_config_free(&cfg);
}

/* absent keys take transformers' LlamaConfig defaults; no rope_scaling: seq_len from max_position */
static void defaults_of_absent_keys(void **state)
{
    hf_dir("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2,\n"
           " \"intermediate_size\": 160, \"vocab_size\": 256, \"max_position_embeddings\": 512}\n");
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", NULL), DT_SUCCESS);
    assert_int_equal(cfg.model.n_kv_head, 4); /* num_key_value_heads absent: multi-head */
    assert_true(cfg.model.norm_eps == 1e-6 && cfg.model.rope_theta == 10000 && !cfg.model.tie_embeddings);
    assert_int_equal(cfg.model.rope_scaling.type, DT_ROPE_NONE);
    assert_int_equal(cfg.model.seq_len, 512);
    assert_string_equal(dt_config_origin(&cfg, "model.seq_len")->note, "model.init_from hf (max_position_embeddings)");
    dt_config_free(&cfg);
}

/* a key set that disagrees names both values and both places, every one at once */
static void disagreements(void **state)
{
    hf_dir(llama32);
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, "model:\n  init_from: hf\n  n_layer: 4\n  norm_eps: 1.0e-5\n"
                                    "  tie_embeddings: false\n", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(),
                        "t.yaml:3:12: error: model.n_layer 4 (t.yaml:3:12) disagrees with model.init_from hf: "
                        "num_hidden_layers 16 (hf/config.json:6:24)\n"
                        "  hint: remove the key (model.init_from fills it), or load a model of this shape\n"
                        "t.yaml:4:13: error: model.norm_eps 1e-05 (t.yaml:4:13) disagrees with model.init_from hf: "
                        "rms_norm_eps 1e-06 (hf/config.json:12:19)\n"
                        "  hint: remove the key (model.init_from fills it), or load a model of this shape\n"
                        "t.yaml:5:19: error: model.tie_embeddings false (t.yaml:5:19) disagrees with model.init_from "
                        "hf: tie_word_embeddings true (hf/config.json:19:26)\n"
                        "  hint: remove the key (model.init_from fills it), or load a model of this shape");
    dt_config_free(&cfg);
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", "model.type=gpt", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "override 'model.type=gpt': error: model.type gpt (override 'model.type=gpt') "
                                        "disagrees with model.init_from hf: model_type llama (hf/config.json:3:17)\n"
                                        "  hint: drop model.type (model.init_from fills it)");
    dt_config_free(&cfg);
    /* a preset beside it must describe the same model (a template's preset with init_from added) */
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", "model.preset=llama3.2-1b", NULL),
                     DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "override 'model.preset=llama3.2-1b': error: model.preset llama3.2-1b does not "
                                        "describe model.init_from hf: model.norm_eps is 1e-06 there\n"
                                        "  hint: drop model.preset: model.init_from fixes the shape");
    dt_config_free(&cfg);
    hf_dir_with("1e-06", "1e-05");
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", "model.preset=llama3.2-1b", NULL),
                     DT_SUCCESS);
    assert_string_equal(dt_config_origin(&cfg, "model.n_layer")->note, "model.init_from hf");
    dt_config_free(&cfg);
}

/* values of the wrong kind, and what dtrun's Llama does not compute, with their places */
static void refused(void **state)
{
    struct dt_config cfg;
    hf_dir_with("\"llama\"", "{}");
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "hf/config.json:3:17: error: model_type in hf/config.json:3:17 is not a plain "
                                        "value: dtrun loads Hugging Face weights of model_type llama\n"
                                        "  hint: model.init_from takes a LlamaForCausalLM directory or an llm.c GPT-2 "
                                        "model file");
    dt_config_free(&cfg);
    hf_dir_with("\"llama\"", "\"gpt2\"");
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", NULL), DT_ERR_CONFIG);
    assert_non_null(strstr(dt_error_msg(), "model_type in hf/config.json:3:17 is gpt2: dtrun loads Hugging Face "
                                           "weights of model_type llama\n  hint: a GPT-2's weights load from llm.c's "
                                           "model file (gpt2_124M.bin): point model.init_from at it"));
    dt_config_free(&cfg);
    hf_dir_with("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": [1]");
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "hf/config.json:19:26: error: tie_word_embeddings in hf/config.json:19:26 is a "
                                        "list, not a boolean\n"
                                        "  hint: config.json is transformers' LlamaConfig: true or false");
    dt_config_free(&cfg);
    hf_dir_with("\"hidden_size\": 2048", "\"hidden_size\": \"2048\"");
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", NULL), DT_ERR_CONFIG);
    assert_non_null(strstr(dt_error_msg(), "hidden_size in hf/config.json:4:18 is 2048, not a number"));
    dt_config_free(&cfg);
    hf_dir_with("\"head_dim\": 64", "\"head_dim\": 128");
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "hf/config.json:9:15: error: head_dim in hf/config.json:9:15 is 128: dtrun's "
                                        "heads are hidden_size / num_attention_heads wide\n"
                                        "  hint: a model with a head size of its own cannot be loaded");
    dt_config_free(&cfg);
    hf_dir_with("\"mlp_bias\": false", "\"mlp_bias\": true");
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", NULL), DT_ERR_CONFIG);
    assert_non_null(strstr(dt_error_msg(), "mlp_bias in hf/config.json:18:15 is true: dtrun's Llama has no biases"));
    dt_config_free(&cfg);
    hf_dir_with("\"llama3\"", "\"yarn\"");
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", NULL), DT_ERR_CONFIG);
    assert_non_null(strstr(dt_error_msg(), "rope_scaling.rope_type in hf/config.json:15:60 is yarn: dtrun scales "
                                           "rotary frequencies as Llama 3.1 does (llama3) or not at all"));
    dt_config_free(&cfg);
    hf_dir_with("\"silu\"", "\"gelu\"");
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=hf", NULL), DT_ERR_CONFIG);
    assert_non_null(strstr(dt_error_msg(), "hidden_act in hf/config.json:16:17 is gelu: dtrun's Llama computes SwiGLU "
                                           "with silu"));
    dt_config_free(&cfg);
}

static void write_llmc(const char *path, const int32_t *h8)
{
    int32_t h[256] = {0};
    memcpy(h, h8, 8 * sizeof *h);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(h, sizeof h, 1, f), 1);
    fclose(f);
}

/* llm.c's header: GPT-2 124M's shape, its 1024 positions the longest sequence */
static void llmc_header(void **state)
{
    write_llmc("gpt2.bin", (const int32_t[]){20240326, 3, 1024, 50257, 12, 12, 768, 50304});
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=gpt2.bin", NULL), DT_SUCCESS);
    assert_int_equal(cfg.model.type, DT_MODEL_GPT);
    assert_true(cfg.model.n_layer == 12 && cfg.model.n_head == 12 && cfg.model.n_embd == 768);
    assert_int_equal(cfg.model.vocab_size, 50257);
    assert_int_equal(cfg.model.seq_len, 1024);
    assert_string_equal(dt_config_origin(&cfg, "model.n_embd")->note, "model.init_from gpt2.bin");
    assert_string_equal(dt_config_origin(&cfg, "model.seq_len")->note, "model.init_from gpt2.bin (max_seq_len)");
    dt_config_free(&cfg);
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=gpt2.bin", "model.seq_len=256", NULL),
                     DT_SUCCESS);
    dt_config_free(&cfg);
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=gpt2.bin", "model.seq_len=2048",
                                    "model.n_head=4", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(),
                        "override 'model.n_head=4': error: model.n_head 4 (override 'model.n_head=4') disagrees with "
                        "model.init_from gpt2.bin: n_head (header int 5) 12 (gpt2.bin's header)\n"
                        "  hint: remove the key (model.init_from fills it), or load a model of this shape\n"
                        "override 'model.seq_len=2048': error: model.seq_len 2048 (override 'model.seq_len=2048') is "
                        "longer than the 1024 positions model.init_from gpt2.bin holds\n"
                        "  hint: lower model.seq_len, or remove it (init_from fills it)");
    dt_config_free(&cfg);
    write_llmc("bf16.bin", (const int32_t[]){20240326, 5, 1024, 50257, 12, 12, 768, 50304});
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=bf16.bin", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "override 'model.init_from=bf16.bin': error: model.init_from bf16.bin: llm.c "
                                        "model version 5 at byte 4; dtrun reads version 3 (float32)\n"
                                        "  hint: use the float32 file (gpt2_124M.bin, not gpt2_124M_bf16.bin)");
    dt_config_free(&cfg);
}

static void not_a_model(void **state)
{
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=nowhere", NULL), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "override 'model.init_from=nowhere': error: cannot read model.init_from "
                                        "nowhere: No such file or directory\n"
                                        "  hint: model.init_from takes a Hugging Face model directory (config.json "
                                        "beside its safetensors) or an llm.c model file");
    dt_config_free(&cfg);
    dt_test_write("text.txt", "hello, this is no model file at all\n");
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=text.txt", NULL), DT_ERR_CONFIG);
    assert_non_null(strstr(dt_error_msg(), "model.init_from text.txt is not an llm.c model file: magic 1819043176 at "
                                           "byte 0, expected 20240326"));
    dt_config_free(&cfg);
    mkdir("empty", 0755);
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "model.init_from=empty", NULL), DT_ERR_CONFIG);
    assert_non_null(strstr(dt_error_msg(), "model.init_from empty: empty/config.json: error: cannot read"));
    dt_config_free(&cfg);
}

DT_TESTS(T(fills_every_key), T(defaults_of_absent_keys), T(disagreements), T(refused), T(llmc_header),
         T(not_a_model))
