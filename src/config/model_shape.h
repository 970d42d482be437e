/* Whether a model's shape holds together: d_model, n_head and n_kv_head
 * divide as attention needs, the architecture's own needs (GPT-2 has one
 * key/value head per query head; RoPE needs an even head dimension) and
 * RoPE scaling's.  Each key's own range is its schema row's; these are the
 * checks across [model] keys, kept apart from resolve.c because the
 * checkpoint reader holds a manifest's model to them too
 * (ckpt/checkpoint_read.c), without the rest of configuration loading. */
#ifndef ST_MODEL_SHAPE_H
#define ST_MODEL_SHAPE_H

#include "config/config.h"

/* A shape that does not hold together: the [model] key to name, the other
 * key involved (resolve.c names it instead when only it was set), what is
 * wrong, and a hint. */
typedef struct {
    const char *key, *other;
    char what[160];
    const char *hint;
} st_shape_problem;

/* 1 with *p describing the first problem, 0 when the shape holds.  The
 * sizes must already be in their schema ranges (n_head, n_kv_head >= 1). */
int st_model_shape_problem(const st_model_config *m, st_shape_problem *p);

#endif
