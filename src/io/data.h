/* Token data: llm.c-format shard files, memory-mapped, and the
 * deterministic choice of training windows.
 *
 * File format (little-endian): a header of 256 int32; header[0] is the
 * magic, header[1] the version, header[2] the token count; then the tokens.
 * magic 20240520 version 1 stores uint16 tokens, magic 20240801 version 7
 * stores uint32 tokens.
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
} st_token_file;

typedef struct {
    st_token_file *files;
    int n_files;
    int64_t seq_len;
    int64_t n_windows;          /* sum over files of n_tokens - seq_len */
    int64_t *window_start;      /* n_files + 1 prefix sums of windows per file */
    int64_t n_tokens;           /* all tokens, all files */
} st_dataset;

/* Open every file matching the glob (sorted by name), map it and validate:
 * magic and version, header token count against the file size, every token
 * id < vocab_size, at least seq_len + 1 tokens in the set.  On error prints
 * one line naming the file (or cfg_file:cfg_line for an empty glob) and
 * returns ST_EXIT_USAGE; 0 on success. */
int st_dataset_open(st_dataset *ds, const char *glob_pattern, int64_t seq_len,
                    int64_t vocab_size, const char *cfg_file, int cfg_line);
void st_dataset_close(st_dataset *ds);

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
 * else a tokenizer.json or a directory holding one (io/tokenizer.h), the
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

/* Calls fn for the text of every document of a JSONL file's bytes, in
 * order (prepare_jsonl.c); a line that is not {"text": "..."} stops it
 * with a FILE:LINE error and ST_EXIT_USAGE.  Returns 0, fn's first
 * non-zero result, or that error. */
typedef int (*st_document_fn)(void *ctx, const char *text, size_t len);
int st_jsonl_documents(const char *path, const unsigned char *bytes, int64_t n,
                       st_document_fn fn, void *ctx);

/* Write one shard file (used by prepare and by tests to make bad files). */
int st_write_token_file(const char *path, const uint32_t *tokens, int64_t n,
                        int version);

#endif
