/* AdamW's update on host memory.  It works on any contiguous slice of
 * parameters, so the sharded engine can apply it to the slice a rank owns. */
#ifndef ST_CPU_ADAMW_H
#define ST_CPU_ADAMW_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One AdamW step over n elements with bias correction for step t (1-based).
 * grad_scale multiplies the gradient first (clipping); weight_decay is
 * decoupled, lr * wd * p, and is passed as 0 for tensors that do not decay. */
void st_adamw(float *p, const float *g, float *m, float *v, int64_t n,
              double lr, double beta1, double beta2, double eps,
              double weight_decay, double grad_scale, int64_t t);

#ifdef __cplusplus
}
#endif

#endif
