/* The kernels backend selector (see kernels.h): which backend a rank
 * computes on follows the device it was bound to, and a backend that
 * cannot run the configured model says so here, before any work.  The
 * backends themselves know nothing of each other or of this choice.  An
 * instance is the selector's to make and to end (st_kernels_close): the
 * cpu backends hand out one static instance, the cuda backend a new one
 * that owns its stream and device state. */
#include "kernels/kernels_backends.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

int st_kernels_for_device(const st_config *cfg, int device, st_kernels **out)
{
    static const char var[] = "SHARDTRAIN_TEST_KERNELS";
    if (device >= 0) {
        int rc = st_kernels_cuda_check(cfg);
        return rc ? rc : st_kernels_cuda_open(cfg->train.precision == ST_PREC_BF16, out);
    }
    const char *s = getenv(var);
    if (!s || !*s || !strcmp(s, "cpu")) {
        *out = st_kernels_cpu();
        return 0;
    }
    if (!strcmp(s, "cpu-bf16params")) {
        *out = st_kernels_cpu_bf16params();
        return 0;
    }
    st_error(var, "'%s' is not a kernels backend this build can test; hint: "
             "cpu or cpu-bf16params", s);
    return ST_EXIT_USAGE;
}

int st_kernels_for_memory(int on_device, st_kernels **out)
{
    if (on_device)
        return st_kernels_cuda_open(0, out);
    *out = st_kernels_cpu();
    return 0;
}

void st_kernels_close(st_kernels *k)
{
    if (k && k->ops->destroy)
        k->ops->destroy(k);
}
