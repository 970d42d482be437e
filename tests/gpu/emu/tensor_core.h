/* Exact host models of the warp-level instructions of cuda/tensor_core.cuh
 * (mma.sync m16n8k16 bf16, ldmatrix .x1/.x2/.x4 with and without .trans,
 * cp.async with commit_group / wait_group), for the fiber emulation of
 * shim.h, which includes this file last.  Defining ST_CUDA_EMULATION makes
 * tensor_core.cuh leave out its inline PTX, so a kernel calls these.
 *
 * Warp-collective instructions.  Every lane of the warp must reach the
 * instruction (.sync.aligned): each lane writes its operands (registers or
 * a row address) into the warp's slot table, waits at the warp barrier,
 * and then builds its own results from the whole warp's slots following
 * the PTX ISA's per-lane fragment tables, so a kernel that puts a value in
 * the wrong register or lane gets wrong numbers here, as on the hardware.
 * The slot tables are double-buffered by the barrier's generation parity,
 * which needs only one barrier per instruction: a lane can write the next
 * instruction's slots only after every lane has reached that instruction,
 * that is, after every lane has finished reading this one's.
 *
 * Numerics of mma: the products of two bf16 values are exact in fp32;
 * the hardware's summation order and internal width are not specified by
 * the PTX ISA, so the model sums the 16 exact products and C in double
 * and rounds once to fp32 (a rounding difference of the order of one fp32
 * ulp from the real unit).
 *
 * cp.async is modelled as late as the ISA allows: a copy happens only
 * when a wait_group that covers its group runs in the issuing thread, so
 * a kernel that reads shared memory before waiting, or before the
 * __syncthreads that makes another thread's copies visible, reads stale
 * data.  Uncommitted copies are never waited for (as in the ISA).
 *
 * Device checks, each an abort naming the instruction: ldmatrix row
 * addresses and cp.async addresses 16-byte aligned; ldmatrix and the
 * cp.async destination not in device (global) memory; the cp.async source
 * in device memory (where devmem.c's block table is linked). */
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define ST_CUDA_EMULATION 1

/* Dynamic shared memory: one buffer, since the blocks run one at a time;
 * 227 KiB, the most an sm_90 block may have. */
constexpr size_t emu_dynamic_smem_bytes = 227 * 1024;
alignas(128) inline unsigned char emu_dynamic_smem_buf[emu_dynamic_smem_bytes];
inline bool emu_dynamic_smem_used; /* the running block took its pointer */
#define ST_DYNAMIC_SMEM(name) \
    unsigned char *name = (emu_dynamic_smem_used = true, emu_dynamic_smem_buf)

inline void emu_tc_die(const char *what, const void *p)
{
    fprintf(stderr, "cuda emulation: %s (address %p, thread %u of block %u,%u,%u)\n", what, p,
            emu_linear, emu_blockIdx.x, emu_blockIdx.y, emu_blockIdx.z);
    abort();
}

inline void emu_tc_check_shared(const void *p, const char *insn)
{
    char msg[160];
    if ((uintptr_t)p % 16) {
        snprintf(msg, sizeof msg, "%s: address not 16-byte aligned", insn);
        emu_tc_die(msg, p);
    }
    if (emu_dev_contains && emu_dev_contains(p)) {
        snprintf(msg, sizeof msg, "%s: address is global (device) memory, not shared", insn);
        emu_tc_die(msg, p);
    }
}

/* The warp's slot tables, [parity][warp][lane]. */
inline uint32_t emu_tc_a[2][32][32][4], emu_tc_b[2][32][32][2];
inline const void *emu_tc_addr[2][32][32];

/* Arrive at the warp barrier; returns the parity of the slot set this
 * instruction uses (read before arriving: all lanes of one instruction
 * see the same generation). */
inline unsigned emu_tc_parity() { return emu_warp_bar[emu_linear / 32].gen & 1; }
inline void emu_tc_arrive() { emu_bar_wait(emu_warp_bar[emu_linear / 32]); }

inline float emu_bf16_bits_to_float(uint32_t bits16)
{
    const uint32_t u = bits16 << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint32_t emu_half(uint32_t reg, int hi) { return hi ? reg >> 16 : reg & 0xffffu; }

namespace st_cuda {

inline void st_mma_bf16_16816(float *d, const uint32_t *a, const uint32_t *b, const float *c)
{
    const unsigned w = emu_linear / 32, lane = emu_linear % 32, par = emu_tc_parity();
    for (int i = 0; i < 4; i++)
        emu_tc_a[par][w][lane][i] = a[i];
    emu_tc_b[par][w][lane][0] = b[0];
    emu_tc_b[par][w][lane][1] = b[1];
    const float c_own[4] = {c[0], c[1], c[2], c[3]};
    emu_tc_arrive();
    const unsigned g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        const unsigned row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        double sum = c_own[i];
        for (unsigned k = 0; k < 16; k++) {
            /* A[row][k]: lane (row % 8) * 4 + (k % 8) / 2, register
             * (row >= 8) + 2 (k >= 8), half k & 1 */
            const unsigned a_lane = (row % 8) * 4 + (k % 8) / 2;
            const unsigned a_reg = (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
            /* B[k][col]: lane col * 4 + (k % 8) / 2, register k >= 8 */
            const unsigned b_lane = col * 4 + (k % 8) / 2, b_reg = k >= 8 ? 1 : 0;
            const float x = emu_bf16_bits_to_float(emu_half(emu_tc_a[par][w][a_lane][a_reg], k & 1));
            const float y = emu_bf16_bits_to_float(emu_half(emu_tc_b[par][w][b_lane][b_reg], k & 1));
            sum += (double)x * (double)y;
        }
        d[i] = (float)sum;
    }
}

/* ldmatrix of N matrices; row addresses from lanes 8i .. 8i+7 for matrix i. */
template <int N, bool TRANS> inline void emu_ldmatrix(uint32_t *r, const void *row)
{
    const unsigned w = emu_linear / 32, lane = emu_linear % 32, par = emu_tc_parity();
    emu_tc_addr[par][w][lane] = row;
    emu_tc_arrive();
    const char *insn = TRANS ? "ldmatrix.trans" : "ldmatrix";
    for (unsigned l = 0; l < 8u * N; l++)
        emu_tc_check_shared(emu_tc_addr[par][w][l], insn);
    const unsigned g = lane >> 2, t = lane & 3;
    for (int m = 0; m < N; m++) {
        uint16_t e[2];
        for (int j = 0; j < 2; j++) {
            /* element (row, col) of matrix m as stored: row-major 8x8 */
            const unsigned srow = TRANS ? 2 * t + j : g, scol = TRANS ? g : 2 * t + j;
            memcpy(&e[j], (const char *)emu_tc_addr[par][w][8 * m + srow] + 2 * scol, 2);
        }
        r[m] = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
    }
}
inline void st_ldmatrix_x1(uint32_t *r, const void *p) { emu_ldmatrix<1, false>(r, p); }
inline void st_ldmatrix_x2(uint32_t *r, const void *p) { emu_ldmatrix<2, false>(r, p); }
inline void st_ldmatrix_x4(uint32_t *r, const void *p) { emu_ldmatrix<4, false>(r, p); }
inline void st_ldmatrix_x1_trans(uint32_t *r, const void *p) { emu_ldmatrix<1, true>(r, p); }
inline void st_ldmatrix_x2_trans(uint32_t *r, const void *p) { emu_ldmatrix<2, true>(r, p); }
inline void st_ldmatrix_x4_trans(uint32_t *r, const void *p) { emu_ldmatrix<4, true>(r, p); }

} /* namespace st_cuda */

/* cp.async state of each CUDA thread of the running block: the copies
 * issued since the last commit, and the committed groups, oldest first. */
struct emu_cp_copy {
    void *dst;
    const void *src;
    int src_bytes;
};
struct emu_cp_thread {
    std::vector<emu_cp_copy> open;
    std::vector<std::vector<emu_cp_copy>> groups;
};
inline std::vector<emu_cp_thread> emu_cp_state;

/* Called by emu_launch before each block: nothing in flight. */
inline void emu_cp_reset(unsigned threads)
{
    emu_cp_state.assign(threads, emu_cp_thread());
}

namespace st_cuda {

inline void st_cp_async_16(void *dst, const void *src, int src_bytes)
{
    emu_tc_check_shared(dst, "cp.async destination");
    if ((uintptr_t)src % 16)
        emu_tc_die("cp.async: source not 16-byte aligned", src);
    if (src_bytes < 0 || src_bytes > 16)
        emu_tc_die("cp.async: src-size outside 0..16", src);
    if (src_bytes > 0 && emu_dev_contains && !emu_dev_contains(src))
        emu_tc_die("cp.async: source is not device memory", src);
    emu_cp_state[emu_linear].open.push_back({dst, src, src_bytes});
}

inline void st_cp_async_commit()
{
    emu_cp_thread &s = emu_cp_state[emu_linear];
    s.groups.push_back(std::move(s.open));
    s.open.clear();
}

template <int N> inline void st_cp_async_wait()
{
    emu_cp_thread &s = emu_cp_state[emu_linear];
    while (s.groups.size() > (size_t)N) {
        for (const emu_cp_copy &c : s.groups.front()) {
            memcpy(c.dst, c.src, (size_t)c.src_bytes);
            memset((char *)c.dst + c.src_bytes, 0, (size_t)(16 - c.src_bytes));
        }
        s.groups.erase(s.groups.begin());
    }
}

} /* namespace st_cuda */

