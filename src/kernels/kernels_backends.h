/* Constructors of the kernels backends.  Only the selector
 * (kernels_select.c) and tests that want one backend by name include
 * this; the engine and everything else use kernels.h. */
#ifndef ST_KERNELS_BACKENDS_H
#define ST_KERNELS_BACKENDS_H

#include "config/config.h"
#include "kernels/kernels.h"

/* The CPU reference, host memory (kernels_cpu.c).  It holds no state, so
 * its one instance is static and closing it does nothing. */
st_kernels *st_kernels_cpu(void);
/* The same ops taking bf16 parameters (params_bf16), for tests. */
st_kernels *st_kernels_cpu_bf16params(void);

/* What the cuda backend cannot run, refused before any work: prints the
 * error at the configuration line and returns ST_EXIT_USAGE, else 0. */
int st_kernels_cuda_check(const st_config *cfg);
/* A new instance of the cuda backend (kernels_cuda.c) on the current CUDA
 * device, in bf16 storage mode when bf16 (train.precision = bf16) or
 * fp32, with its own compute stream (st_kernels.stream).  Returns an exit
 * status; in a build without CUDA always an error. */
int st_kernels_cuda_open(int bf16, st_kernels **out);

#endif
