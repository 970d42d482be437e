/* Definitions for the fuzz targets of what the parser's file also uses but
 * the parser never calls: checkpoint_read.c's resume path reaches the
 * runtime and the FSDP engine (MPI), and st_ckpt_step_dir lives with the
 * writer.  Reaching one of these from a target is a bug in the target, so
 * each aborts. */
#include "io/checkpoint.h"
#include "runtime/runtime.h"
#include "engine/fsdp.h"

#include <stdlib.h>

void st_ckpt_step_dir(const char *dir, int64_t step, char *buf, size_t n)
{
    (void)dir, (void)step, (void)buf, (void)n;
    abort();
}

int st_runtime_agree(int rc)
{
    (void)rc;
    abort();
}

void st_fsdp_shard_from_host(st_fsdp *f, int u, st_fsdp_array a, int64_t off, int64_t n,
                             const float *src)
{
    (void)f, (void)u, (void)a, (void)off, (void)n, (void)src;
    abort();
}
