/* The kernels backend selector (see kernels_select.h): which backend a rank
 * computes on follows the device it was bound to, and a backend that
 * cannot run the configured model says so here, before any work.  The
 * backends themselves know nothing of each other or of this choice.  An
 * instance is the selector's to make and to end (st_kernels_close): the
 * cpu backends hand out one static instance, the cuda backend a new one
 * that owns its stream and device state. */
#include "kernels/kernels_select.h"
#include "kernels/kernels_backends.h"
#include "base/test_faults.h"

int st_kernels_for_device(const st_config *cfg, int device, st_kernels **out)
{
    if (device >= 0) {
        int rc = st_kernels_cuda_check(cfg);
        return rc ? rc : st_kernels_cuda_open(cfg->train.precision == ST_PREC_BF16, out);
    }
    st_fault_kernels variant;
    int rc = st_fault_kernels_variant(&variant);
    if (!rc)
        *out = variant == ST_FAULT_KERNELS_CPU_BF16PARAMS ? st_kernels_cpu_bf16params()
                                                          : st_kernels_cpu();
    return rc;
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
