/* Token data: llm.c-format shard files, memory-mapped, and the
 * deterministic choice of training windows (the reader: dataset.c; the
 * loss masks: loss_mask.c; the writers: prepare.c, prepare_jsonl.c).
 *
 * File format (little-endian): a header of 256 int32; header[0] is the
 * magic, header[1] the version, header[2] the token count; then the tokens.
 * magic 20240520 version 1 stores uint16 tokens, magic 20240801 version 7
 * stores uint32 tokens.
 *
 * Instruction data (prepare --format jsonl with prompt/completion or
 * messages lines) adds a loss-mask file NAME.mask beside each shard
 * NAME.bin: a header of 256 int32 (magic 20241125, version 1, the token
 * count), then one byte per token: bit 0 (1) the token counts in the loss
 * as a target, bit 1 (2) it is the first token of an example.  Such data is
 * read one example per sequence from its first token, never packed: the
 * tail past the example is padding (token 0) that counts nowhere, and an
 * example longer than seq_len + 1 tokens is cut.  A set is instruction
 * data when every file has its mask, plain text when none has; a mix is
 * an error.
 *
 * The windows that make up global step k are a function of (seed, k, j)
 * alone, j being the sample's index in the global batch, so a step sees the
 * same data whatever the world size or micro-batch split. */
#ifndef ST_DATA_H
#define ST_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *path;
    const unsigned char *map;   /* whole file mapping */
    size_t map_bytes;
    int token_bytes;            /* 2 or 4 */
    int64_t n_tokens;
    /* The loss mask (instruction data), n_tokens entries; NULL when none. */
    const unsigned char *mask;
    const unsigned char *mask_map;
    size_t mask_map_bytes;
} st_token_file;

/* The files are little-endian whatever the host: bytes are decoded and
 * encoded explicitly. */
static inline uint32_t st_le32_load(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}
static inline void st_le32_store(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

enum {
    ST_MASK_MAGIC = 20241125,
    ST_MASK_VERSION = 1,
    ST_MASK_LOSS = 1,           /* the token counts in the loss as a target */
    ST_MASK_START = 2,          /* the token starts an example */
};

typedef struct {
    st_token_file *files;
    int n_files;
    int64_t seq_len;
    int64_t n_windows;          /* sum over files of n_tokens - seq_len */
    int64_t *window_start;      /* n_files + 1 prefix sums of windows per file */
    int64_t n_tokens;           /* all tokens, all files */
    /* Instruction data: the examples in file order, each read as one
     * sequence.  ex_targets: the targets that count in its sequence. */
    int masked;
    int64_t n_examples;
    int32_t *ex_file;
    int64_t *ex_off, *ex_len, *ex_targets;
} st_dataset;

/* Open every file matching the glob (sorted by name), map it and validate:
 * magic and version, header token count against the file size, every token
 * id < vocab_size, at least seq_len + 1 tokens in the set.  On error prints
 * one line naming the file (or cfg_file:cfg_line for an empty glob) and
 * returns ST_EXIT_USAGE; 0 on success. */
int st_dataset_open(st_dataset *ds, const char *glob_pattern, int64_t seq_len,
                    int64_t vocab_size, const char *cfg_file, int cfg_line);
void st_dataset_close(st_dataset *ds);

/* Sample j of global step `step`: seq_len + 1 tokens (inputs are
 * tokens[0..seq_len), targets tokens[1..seq_len]), and when loss is not
 * NULL, loss[k] = 1 when tokens[k] counts in the loss as a target, else 0
 * (always 1 for plain text; padding and prompts are 0).  Returns the
 * number of targets that count. */
int64_t st_dataset_train_sample(const st_dataset *ds, uint64_t seed, int64_t step,
                                int64_t j, int32_t *tokens, uint8_t *loss);
/* Targets that count in that sample, without reading it. */
int64_t st_dataset_train_targets(const st_dataset *ds, uint64_t seed, int64_t step,
                                 int64_t j);
/* Evaluation sample i, as st_dataset_train_sample. */
int64_t st_dataset_eval_sample(const st_dataset *ds, int64_t i, int32_t *tokens,
                               uint8_t *loss);

/* seq_len + 1 tokens of training sample j of global step `step`: inputs
 * are out[0..seq_len), targets out[1..seq_len]. */
void st_dataset_train_window(const st_dataset *ds, uint64_t seed, int64_t step,
                             int64_t j, int32_t *out);
/* Evaluation window i: consecutive non-overlapping windows from the start
 * of the set, wrapping around, so every eval sees the same tokens. */
void st_dataset_eval_window(const st_dataset *ds, int64_t i, int32_t *out);

/* The work of `shardtrain prepare` (prepare.c): tokenise a text file into
 * OUT_PREFIX_train_NNNNNN.bin and OUT_PREFIX_val_NNNNNN.bin, the last
 * val_fraction of the tokens going to val, at most shard_tokens per file.
 * tokenizer NULL: byte level (token = byte, vocab 256, version 1 uint16);
 * else a tokenizer.json or a directory holding one (tok/tokenizer.h), the
 * shards version 1 when the vocabulary is at most 65,536 ids, else
 * version 7 (uint32).  jsonl: the input is JSON lines with a "text" field,
 * each a document encoded on its own (the tokenizer's template, a BOS, at
 * its start) and followed by the tokenizer's EOS when it has one (byte
 * level: by a newline); otherwise the whole file is one text.  Prints what
 * it wrote; returns an exit status. */
typedef struct {
    double val_fraction;
    int64_t shard_tokens;
    const char *tokenizer;
    int jsonl;
} st_prepare_options;
int st_prepare_text(const char *input, const char *out_prefix, const st_prepare_options *o);

/* The lines of a JSONL file (prepare_jsonl.c): fn gets each non-blank
 * line's segments in order ({"text"}: one trained segment; {"prompt",
 * "completion"}: the prompt untrained, the completion trained;
 * {"messages"}: "ROLE: " headers untrained, contents trained for the
 * assistant).  end: an end mark (EOS, or a newline at byte level) follows
 * the segment, counted as the segment is.  *any_instruction: whether some
 * line was prompt/completion or messages.  A bad line stops it with a
 * FILE:LINE error and ST_EXIT_USAGE.  Returns 0, fn's first non-zero
 * result, or that error. */
typedef struct {
    const char *text;
    size_t len;
    int loss;   /* its tokens count in the loss */
    int end;    /* an end mark follows */
} st_segment;
typedef int (*st_example_fn)(void *ctx, const st_segment *segs, int n);
int st_jsonl_examples(const char *path, const unsigned char *bytes, int64_t n,
                      st_example_fn fn, void *ctx, int *any_instruction);

/* The loss-mask files (loss_mask.c).  st_mask_path: NAME.mask for
 * NAME.bin (else the path with .mask appended), malloc'd.  st_mask_file_open
 * maps and checks f's mask when it exists (*present says whether it does);
 * errors are one line and an exit status.  st_dataset_index_examples fills
 * the example arrays of a masked set (what names the set in messages). */
char *st_mask_path(const char *token_path);
int st_write_mask_file(const char *path, const uint8_t *mask, int64_t n);
int st_mask_file_open(st_token_file *f, int *present);
void st_mask_file_close(st_token_file *f);
int st_dataset_index_examples(st_dataset *ds, const char *what);

/* Write one shard file (used by prepare and by tests to make bad files). */
int st_write_token_file(const char *path, const uint32_t *tokens, int64_t n,
                        int version);

#endif
