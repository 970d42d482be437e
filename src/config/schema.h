/* The configuration schema: one table row per INI key, giving its section,
 * type, default, allowed range or values, documentation and place in
 * st_config.  The parser, the validator, `shardtrain check`, `shardtrain
 * keys` and the key reference in shardtrain.ini(5) all read this table, so
 * adding a key here is the whole job of adding a key.  The model presets
 * live here too because they are part of what a key's default means. */
#ifndef ST_SCHEMA_H
#define ST_SCHEMA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { ST_T_INT, ST_T_FLOAT, ST_T_BOOL, ST_T_STRING, ST_T_ENUM } st_type;

/* Range flags: which bounds apply and whether they are exclusive. */
enum {
    ST_R_MIN = 1, ST_R_MAX = 2,
    ST_R_MIN_OPEN = 4, ST_R_MAX_OPEN = 8,
};

typedef struct {
    const char *section, *key;
    st_type type;
    const char *def;          /* default as text; NULL when derived from other keys */
    const char *defdoc;       /* how a derived default is computed (def == NULL) */
    double min, max;          /* numeric bounds, see flags */
    unsigned flags;
    const char *const *values; /* ST_T_ENUM: names in enum order, NULL-terminated */
    const char *doc;          /* one line for check/man */
    size_t offset;            /* offsetof into st_config */
} st_key;

extern const st_key st_schema[];
extern const int st_schema_n;
/* Section names in file order, NULL-terminated. */
extern const char *const st_sections[];

/* Where row k's value lives in a st_config: k->offset bytes into it. */
static inline void *st_schema_field(const void *cfg, const st_key *k)
{
    return (char *)cfg + k->offset;
}

/* Index of section.key in st_schema, or -1. */
int st_schema_index(const char *section, const char *key);
/* "a|b|c" for an enum, bool or preset list into buf. */
const char *st_schema_values_text(const st_key *k, char *buf, size_t n);
/* Whether v lies in row k's range (see the flags); NaN never does.  The
 * one range check of a value, whether it came from the INI file, the
 * command line or a checkpoint's manifest. */
int st_schema_in_range(const st_key *k, double v);
/* The same for an integer key's value, compared as an integer: as a double
 * it would round above 2^53, and 2^53 + 1 would pass a bound of 2^53. */
int st_schema_int_in_range(const st_key *k, int64_t v);
/* "> 0", "[0, 1)", ... or "" when unbounded, into buf. */
const char *st_schema_range_text(const st_key *k, char *buf, size_t n);
/* Edit distance, for "did you mean" suggestions. */
int st_levenshtein(const char *a, const char *b);

/* Where a key's value came from; one per schema row, in cfg->origin. */
/* In increasing priority; ST_FROM_FILE and above are set explicitly.
 * ST_FROM_HF: model.init's config.json (config/hf_shape.h). */
enum st_origin_src { ST_FROM_DEFAULT, ST_FROM_PRESET, ST_FROM_HF, ST_FROM_FILE, ST_FROM_CMDLINE };
struct st_config_origin {
    int src;                  /* enum st_origin_src */
    int line;                 /* file line or command-line argument number */
};

/* A model preset.  Zero / negative fields leave the key to its default;
 * the per-arch pairs let `tiny` fit either architecture. */
typedef struct {
    const char *name;
    int arch;                 /* enum st_arch, or -1 to keep the configured arch */
    int64_t n_layer, n_head;
    int64_t n_kv_head[2];     /* by arch; 0 = n_head */
    int64_t d_model;
    int64_t d_ff[2];          /* by arch */
    int64_t vocab_size, seq_len;
    double rope_theta, norm_eps; /* 0 = keep */
    int tie_embeddings;       /* -1 = keep */
} st_preset;

extern const st_preset st_presets[];
extern const int st_presets_n;
const st_preset *st_preset_find(const char *name);

/* roff (man(7)) key reference, grouped by section, for shardtrain.ini(5). */
void st_schema_print_man(FILE *out);
/* `section.key`, one per line. */
void st_schema_print_keys(FILE *out);

#endif
