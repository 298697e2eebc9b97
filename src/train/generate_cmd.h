/*
 * generate_cmd.h - `dtrun generate SOURCE --prompt TEXT` (#40): text from a trained model. SOURCE is
 * a checkpoint (step-<N>/, a checkpoint.dir, its latest file, or a run.dir: the newest valid one), a
 * Hugging Face Llama directory (config.json and safetensors) or llm.c's GPT-2 model file. The
 * tokenizer is --tokenizer, else the run's model.tokenizer (recorded from the prepare.json beside its
 * shards), else the Hugging Face directory's tokenizer.json, else bytes for a vocabulary of 256. The
 * model runs in the precision it trained in (a checkpoint's; fp32 for the others, or --precision) on
 * the GPU when there is one (--device), with a key/value cache: the prompt in one forward, then one
 * token a step, printed as it is decoded.
 */
#ifndef DT_GENERATE_CMD_H
#define DT_GENERATE_CMD_H

#include <stdbool.h>
#include <stdio.h>
#include "core/status.h"
#include "model/sampler.h"

struct dt_generate_opts {
    const char *source;
    const char *prompt;      /* text (the tokenizer's document token first, as prepare puts it) */
    const char *prompt_file; /* the text in a file */
    const char *prompt_ids;  /* "1,2,3": the ids themselves, as they are */
    const char *tokenizer;   /* NULL: the source's */
    const char *device;      /* cpu, cuda or auto */
    const char *precision;   /* NULL: the source's */
    int max_tokens;
    struct dt_sampler_opts sampler;
    bool seeded;             /* sampler.seed given; else one from the clock, said on stderr */
    bool ids;                /* print the new ids, not their text */
    bool ignore_eos;
};

/* The text (or ids) to out, what it took to stderr. */
dt_status_t dt_generate_main(const struct dt_generate_opts *o, FILE *out);

#endif
