/* A kernel whose static shared memory is declared in a header, for
 * tests/gpu/test_tensor_core.cu item 8: the emulation must count a
 * header's `__shared__` arrays as it counts a .cu file's (transform.py
 * inlines the headers beside the file it rewrites), since cuda/common.cuh
 * declares one for the column-sum finisher.  256 static bytes, as
 * static_smem_kernel's, and no use of the dynamic bytes. */
#ifndef ST_TEST_STATIC_SMEM_HEADER_CUH
#define ST_TEST_STATIC_SMEM_HEADER_CUH

__global__ void header_static_smem_kernel(int *ran)
{
    __shared__ float pad[64];
    pad[threadIdx.x % 64] = (float)(threadIdx.x % 64);
    __syncthreads();
    if (threadIdx.x == 0)
        *ran = pad[blockDim.x - 1] == (float)(blockDim.x - 1);
}

#endif
