/* Starting weights from Hugging Face checkpoints (model.init).
 *
 * model.init names a .safetensors file, or a directory holding either
 * model.safetensors or shards listed by model.safetensors.index.json, and
 * optionally config.json, which is checked against the configured model
 * shape (never used to override it).  Tensor names are transformers'
 * (GPT2LMHeadModel or GPT2Model for gpt2, LlamaForCausalLM for llama); F32,
 * F16 and BF16 are converted to fp32 as they are read.
 *
 * Every header is validated on every rank before any tensor byte is read;
 * then each rank preads only the bytes that fall inside its own slices of
 * the units' flat buffers, so a rank of N reads about 1/N of the weights. */
#ifndef ST_HF_IMPORT_H
#define ST_HF_IMPORT_H

#include <stdint.h>

#include "config/config.h"
#include "model/model.h"

typedef struct {
    uint64_t data_read;      /* tensor data bytes this rank read */
    uint64_t data_total;     /* tensor data bytes of the model's tensors in the files */
    uint64_t header_read;    /* length prefixes and JSON headers read */
    int files;               /* safetensors files opened */
} st_hf_io;

/* Fill dst[u][0 .. len[u]) with elements [lo[u], lo[u] + len[u]) of unit
 * u's flat buffer, for every unit; elements past the unit's end (padding)
 * are zero.  Each bad input is one error line naming the file (and the
 * tensor or config.json field) and returns ST_EXIT_USAGE; an I/O failure
 * while reading returns ST_EXIT_FAILURE.  io may be NULL.  With the
 * environment variable SHARDTRAIN_DEBUG_IO set, each rank prints what it
 * read on stderr. */
int st_hf_load_slices(const char *init, const st_model *m, const st_model_config *mc,
                      const int64_t *lo, const int64_t *len, float *const *dst,
                      st_hf_io *io);

/* Weights opened once and read many times (the final weights and export
 * of a LoRA run read the base unit by unit): every header is read and
 * validated by st_hf_open, the files stay open, and each st_hf_read only
 * preads tensor bytes. */
typedef struct st_hf_weights st_hf_weights;

/* Open init (as st_hf_load_slices does) into *w.  Returns an exit status,
 * the error printed; *w is NULL then. */
int st_hf_open(const char *init, const st_model *m, const st_model_config *mc,
               st_hf_weights **w);
/* st_hf_load_slices' read, through an open handle. */
int st_hf_read(st_hf_weights *w, const int64_t *lo, const int64_t *len, float *const *dst);
/* Close w (NULL is allowed), first copying what it read into io (which
 * may be NULL); with SHARDTRAIN_DEBUG_IO set and no read failed, prints
 * that as one line. */
void st_hf_close(st_hf_weights *w, st_hf_io *io);

/* IEEE 754 binary16 bits to float, exactly (every half is a float). */
float st_hf_half_to_float(uint16_t h);

/* Check a Hugging Face config.json against the configured model shape
 * (hf_config.c).  A mismatch is one error naming the file and the field;
 * returns an exit status. */
int st_hf_check_config(const char *path, const st_model_config *mc);

#endif
