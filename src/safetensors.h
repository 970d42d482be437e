/* safetensors files: the weights format of Hugging Face.  shardtrain
 * writes its trained model in it (fp32, Hugging Face tensor names) and reads
 * weights from it for model.init and `shardtrain sample`.  The reader
 * treats the file as hostile: every length, offset, dtype and shape is
 * checked before a byte of tensor data is touched. */
#ifndef ST_SAFETENSORS_H
#define ST_SAFETENSORS_H

#include "model.h"

/* Write every tensor of the model from the per-unit flat buffers, atomically
 * (temporary file, fsync, rename).  Returns an exit status. */
int st_safetensors_save_model(const char *path, const st_model *m,
                              float *const *unit_params);
/* Fill the per-unit flat buffers from a file holding exactly the model's
 * tensors (F32, F16 or BF16, converted to fp32).  A missing, extra or
 * mis-shaped tensor is an error naming the file and the tensor.  Returns
 * an exit status. */
int st_safetensors_load_model(const char *path, const st_model *m,
                              float *const *unit_params);

#endif
