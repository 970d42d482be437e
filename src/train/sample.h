/* `shardtrain sample`: generate text from trained weights. */
#ifndef ST_SAMPLE_H
#define ST_SAMPLE_H

#include <stdint.h>

#include "config/config.h"
#include "runtime/runtime.h"

typedef struct {
    const char *weights;     /* NULL: checkpoint.dir/final/model.safetensors */
    const char *prompt;      /* the prompt's text */
    const char *tokenizer;   /* tokenizer.json or its directory; NULL: model.init's
                              * directory when it holds one, else byte level */
    int ids;                 /* print token ids, not text */
    int64_t tokens;          /* how many tokens to generate */
    double temperature;      /* 0 = greedy */
    int64_t top_k;           /* 0 = whole vocabulary */
    uint64_t seed;
} st_sample_options;

/* Returns an exit status. */
int st_sample(const st_config *cfg, st_runtime *rt, const st_sample_options *opt);

#endif
