/* Self-check input of tests/cuda_ptx.sh: a kernel that keeps 96 values live
 * (about 100 registers), once without __launch_bounds__ (a 1024-thread
 * launch of it would fail) and once bounded to 256 threads. */
#define BODY                                                                   \
    float a[96];                                                               \
    _Pragma("unroll") for (int i = 0; i < 96; i++) a[i] = in[threadIdx.x + i * 1024]; \
    _Pragma("unroll") for (int r = 0; r < 4; r++)                              \
        _Pragma("unroll") for (int i = 0; i < 96; i++) a[i] = a[i] * a[(i + 1) % 96] + 1.0f; \
    float s = 0.0f;                                                            \
    _Pragma("unroll") for (int i = 0; i < 96; i++) s += a[i];                  \
    out[threadIdx.x] = s;
__global__ void unbounded_kernel(float *out, const float *in) { BODY }
__global__ void __launch_bounds__(256) bounded_kernel(float *out, const float *in) { BODY }
