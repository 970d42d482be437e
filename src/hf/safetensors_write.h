/* safetensors files: the weights format of Hugging Face.  shardtrain
 * writes its trained model and its exports in it (fp32, Hugging Face tensor
 * names); model.init and `shardtrain sample` read it through hf_import.h,
 * which treats the file as hostile. */
#ifndef ST_SAFETENSORS_H
#define ST_SAFETENSORS_H

#include "model/model.h"

/* Write every tensor of the model from the per-unit flat buffers, atomically
 * (st_file_write_atomic: temporary file, fsync, rename, directory fsync).
 * Returns an exit status. */
int st_safetensors_save_model(const char *path, const st_model *m,
                              float *const *unit_params);

/* The source of unit u's flat buffer (numel floats) for
 * st_safetensors_stream_model; NULL when it cannot be had (the error
 * already printed). */
typedef const float *(*st_unit_source)(int u, void *ctx);

/* st_safetensors_save_model with each unit's buffer fetched as the file
 * reaches it, so the writer holds one unit, never the model: source is
 * called with u = 0, 1, ... in order, at most once each, and the buffer it
 * returns need only live until the next call.  Units the write never
 * reaches (it failed first) are not asked for; a caller whose source takes
 * part in a collective finishes the remaining units itself. */
int st_safetensors_stream_model(const char *path, const st_model *m, st_unit_source source,
                                void *ctx);

/* The same for any tensor table (the LoRA adapters': model.h,
 * lora_tensors), each tensor at its offset in unit_bufs[its unit] and
 * named prefix + its name. */
int st_safetensors_save_tensors(const char *path, const st_tensor *ts, int nt,
                                const char *prefix, float *const *unit_bufs);

#endif
