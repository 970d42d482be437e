/* The warp-level tensor-core instructions the bf16 attention kernels use
 * (cuda/attention_tc.cu), each wrapped in one small inline device function
 * so that the host emulation (tests/gpu/emu/tensor_core.h) can replace it
 * with an exact model of the instruction: the emulation defines
 * ST_CUDA_EMULATION and its own functions of the same names before this
 * header is read, and the PTX versions below are then left out.
 *
 * Fragment layouts are the PTX ISA's ("Matrix fragments for mma.m16n8k16
 * with floating point type" and "Warp-level matrix load instruction:
 * ldmatrix"), with groupID = lane >> 2 and tig = lane & 3:
 *   A (16x16, row-major), four .b32 registers of two bf16 each:
 *     a[0] = A[g][2t..2t+1]    a[1] = A[g+8][2t..2t+1]
 *     a[2] = A[g][2t+8..2t+9]  a[3] = A[g+8][2t+8..2t+9]
 *   B (16x8, "col": k down, n across), two registers:
 *     b[0] = B[2t..2t+1][g]    b[1] = B[2t+8..2t+9][g]
 *   C and D (16x8 fp32): c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1]
 * The lower-numbered element sits in the low 16 bits of a register.
 * ldmatrix .x1/.x2/.x4 loads 1, 2 or 4 8x8 b16 matrices whose row
 * addresses come from lanes 0-7, 8-15, 16-23, 24-31; register i of lane l
 * holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix i (with .trans:
 * rows 2(l%4) and 2(l%4)+1 of column l/4).  Row addresses must be 16-byte
 * aligned shared memory.
 *
 * cp.async (sm_80+) copies 16 bytes global -> shared without passing
 * through registers; copies are grouped by commit_group and
 * wait_group<N> waits until at most N of this thread's groups are still
 * in flight.  The data becomes visible to other threads only after a
 * __syncthreads that follows the wait. */
#ifndef ST_CUDA_TENSOR_CORE_CUH
#define ST_CUDA_TENSOR_CORE_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "dynamic_smem.cuh"

namespace st_cuda {

/* Two fp32 values rounded to bf16 (nearest even) in one .b32 register,
 * lo in the low half: the layout of an A or B fragment register. */
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi)
{
    const uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
    const uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
    return l | (h << 16);
}

} /* namespace st_cuda */

#ifndef ST_CUDA_EMULATION


namespace st_cuda {

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* D = A * B + C, 16x8x16, bf16 inputs, fp32 accumulation. d may be c. */
__device__ __forceinline__ void st_mma_bf16_16816(float *d, const uint32_t *a, const uint32_t *b,
                                                  const float *c)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

__device__ __forceinline__ void st_ldmatrix_x1(uint32_t *r, const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(smem_addr(row)) : "memory");
}
__device__ __forceinline__ void st_ldmatrix_x2(uint32_t *r, const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(row)) : "memory");
}
__device__ __forceinline__ void st_ldmatrix_x4(uint32_t *r, const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)) : "memory");
}
__device__ __forceinline__ void st_ldmatrix_x1_trans(uint32_t *r, const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(smem_addr(row)) : "memory");
}
__device__ __forceinline__ void st_ldmatrix_x2_trans(uint32_t *r, const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(row)) : "memory");
}
__device__ __forceinline__ void st_ldmatrix_x4_trans(uint32_t *r, const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)) : "memory");
}

/* 16 bytes global -> shared; only the first src_bytes (0 or 16 here) are
 * read, the rest of the 16 are zero-filled. */
__device__ __forceinline__ void st_cp_async_16(void *dst_smem, const void *src_global,
                                               int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_addr(dst_smem)), "l"(src_global), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void st_cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void st_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

} /* namespace st_cuda */

#endif /* !ST_CUDA_EMULATION */

#endif
