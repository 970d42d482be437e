/* Hugging Face tokenizers: read a tokenizer.json (the format the
 * `tokenizers` library writes and every hub model ships) and encode and
 * decode text exactly as that library does, for the BPE families the
 * models here use:
 *   - byte-level BPE with a regex pre-tokenisation (GPT-2, Llama 3);
 *   - BPE over characters with SentencePiece's U+2581 metaspace and byte
 *     fallback (Llama 2, TinyLlama, Mistral).
 * Anything else in the file (a WordPiece or Unigram model, an NFKC
 * normaliser, a Bert post-processor, BPE dropout) is refused at load with
 * one error line and ST_EXIT_USAGE, never approximated.
 *
 * Text is bytes.  Invalid UTF-8 is read as the library's Python binding
 * sees text decoded with errors="replace": each maximal invalid subpart
 * becomes U+FFFD (Unicode's recommended practice, which Python and Rust
 * both follow). */
#ifndef ST_TOKENIZER_H
#define ST_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_tokenizer st_tokenizer;

/* Growable list of token ids; st_tokenizer_encode appends to it. */
typedef struct {
    uint32_t *ids;
    size_t n, cap;
} st_token_list;

/* Returns 0, or -1 when out of memory. */
int st_token_list_push(st_token_list *l, uint32_t id);
void st_token_list_free(st_token_list *l);

/* path: a tokenizer.json, or a directory holding one (a model directory).
 * Returns 0, or an exit status after printing one error line. */
int st_tokenizer_load(const char *path, st_tokenizer **out);
void st_tokenizer_free(st_tokenizer *t);

/* One more than the largest id of the vocabulary and added tokens: what a
 * model's vocab_size must at least be. */
int64_t st_tokenizer_vocab_size(const st_tokenizer *t);

/* The id of a token string (vocabulary or added token), or -1. */
int64_t st_tokenizer_token_id(const st_tokenizer *t, const char *token);
/* The token string of an id (NUL-terminated), or NULL. */
const char *st_tokenizer_token(const st_tokenizer *t, int64_t id);

/* The beginning- and end-of-text tokens, for a model directory's
 * generation_config.json and tokenizer_config.json: BOS is the first
 * special token the post-processor puts before the text; failing that,
 * and for EOS, the first special added token among the names the GPT-2
 * and Llama families use (EOS: "</s>", "<|endoftext|>", "<|end_of_text|>",
 * "<|eot_id|>"; BOS: "<s>", "<|begin_of_text|>", "<|endoftext|>").  -1
 * when none. */
int64_t st_tokenizer_bos_id(const st_tokenizer *t);
int64_t st_tokenizer_eos_id(const st_tokenizer *t);

/* Encode len bytes of text and append the ids to out.  add_special: apply
 * the post-processor's template (a Llama BOS, say), as the library's
 * encode(text) does by default.  Returns 0, or ST_EXIT_FAILURE when out of
 * memory. */
int st_tokenizer_encode(st_tokenizer *t, const char *text, size_t len, int add_special,
                        st_token_list *out);

/* Decode ids to UTF-8 text in a malloc'd, NUL-terminated buffer, as the
 * library's decode(ids, skip_special_tokens) does.  An id outside the
 * vocabulary is skipped, as the library skips it.  Returns 0, or
 * ST_EXIT_FAILURE when out of memory. */
int st_tokenizer_decode(const st_tokenizer *t, const uint32_t *ids, size_t n,
                        int skip_special, char **text, size_t *len);

#endif
