/* Choosing a kernels backend (kernels_select.c): the only place that knows
 * which backends exist and which one a rank runs on.  The training loop,
 * sampling and bench-comm ask here; everything else is handed an
 * st_kernels and uses kernels.h alone. */
#ifndef ST_KERNELS_SELECT_H
#define ST_KERNELS_SELECT_H

#include "config/config.h"
#include "kernels/kernels.h"

/* The backend for this rank: cuda when st_device_bind gave it a GPU
 * (device >= 0, from train.device = cuda, or auto with a GPU visible),
 * after the cuda backend's own check of the model; else cpu.
 * SHARDTRAIN_TEST_KERNELS=cpu-bf16params, a testing aid (shardtrain(1),
 * ENVIRONMENT; read through base/test_faults.h), swaps in a CPU backend
 * that takes bf16 parameters, to exercise the engine's params_bf16 path
 * without a GPU; any other value is an error.  Returns an exit status; *out is set on success. */
int st_kernels_for_device(const st_config *cfg, int device, st_kernels **out);
/* A backend for buffers only (no model check, no test hook), fp32: cuda on
 * the bound device when on_device, else cpu.  Returns an exit status. */
int st_kernels_for_memory(int on_device, st_kernels **out);
/* Ends an instance of either function; NULL does nothing. */
void st_kernels_close(st_kernels *k);

#endif
