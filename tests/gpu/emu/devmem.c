/* The emulated device's memory (see shim_c.h), linked only into the
 * emulated shardtrain (build_shardtrain.sh; shim.h and gemm_host.cpp refer
 * to it weakly).
 *
 * Device blocks come from one arena of reserved address space that is
 * PROT_NONE except while the emulated device works on it: a kernel launch,
 * a runtime copy or memset, st_cuda_gemm (emu_dev_open / emu_dev_close
 * around each).  So host code that reads or writes device memory directly
 * (what a real GPU build would do to a device pointer) faults, and the
 * SIGSEGV handler names the address as device memory.  Blocks are bumped
 * out of the arena 256-byte aligned (cudaMalloc's alignment) and never
 * reused, filled with 0xff (NaN) when allocated and again when freed, so a
 * read of uninitialised or freed device memory shows up as NaN.
 *
 * The block table (every live block) lets copies, memsets, frees and
 * kernel pointer arguments be checked against what a GPU could address;
 * searched from the newest block (most lookups are of recent ones).  Each
 * block also holds races.c's record of its accesses (emu_dev_race_slot),
 * freed with the block.
 *
 * The launch record (bench/step_model.py reads it): ST_EMU_RECORD=FILE
 * appends one line per device operation of the run to FILE (a kernel
 * launch with its grid, block and scalar arguments, a cuBLASLt product
 * with its shape, a runtime copy or memset with its size), in order.
 * ST_EMU_RECORD_ONLY=1 goes further: the operations are recorded and
 * checked (pointer arguments, gemm_check.h's rules) but not executed, no
 * device page is ever touched, and a copy to the host writes zeros, so a
 * full-size training step (gigabytes of activations) can be walked on the
 * CPU in seconds for its launch list.  Its numbers are meaningless.
 * ST_EMU_CLOCK=FILE (with ST_EMU_RECORD) writes, for each record line, the
 * host's CLOCK_MONOTONIC time in nanoseconds when the operation was
 * enqueued, one per line, so that bench/host_time.py can say how long the
 * host takes between operations; both files are then buffered rather
 * than flushed at each line, so the timing leaves out the flushing.
 *
 * The device's size: ST_EMU_DEVICE_MEM=BYTES gives the emulated device
 * that much memory, so that running out of it, which no test could cause on
 * a real device without filling one, can be made to happen at any point of
 * a run: an allocation that would take the live blocks past BYTES fails
 * with cudaErrorMemoryAllocation, as cudaMalloc and cudaMallocAsync do on a
 * full device.  Live means allocated and not yet freed, each block counted
 * at its 256-byte rounded size from its allocation to its free; a real
 * device also loses memory to its context and to fragmentation, which are
 * not modelled.  ST_EMU_DEVICE_PEAK=FILE appends, when the process exits,
 * the most live bytes it ever held, one decimal line per process. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "races.h"

/* race: races.c's record of the block's accesses, freed with the block */
struct emu_block { char *p; size_t n; void *race; };
static struct emu_block *blocks;
static size_t nblocks, capblocks;

void *emu_dev_alloc_raw(size_t n);
void emu_dev_open(void);
void emu_dev_close(void);
void emu_dev_register(void *p, size_t n);
size_t emu_dev_unregister(void *p);
long emu_dev_find(const void *p, size_t n);
int emu_dev_contains(const void *p);
void **emu_dev_race_slot(const void *p, size_t *bytes);
int emu_rec_only(void);
int emu_recording(void);
void emu_rec(const char *fmt, ...);

/* Executing, the arena is backed by host memory as it is touched; recording
 * only, nothing is touched, so it may be as large as a real device and
 * more (blocks are never reused). */
static size_t arena_cap = (size_t)8 << 30;
static char *arena;
static size_t used;
static int depth;

/* Live device bytes, their high-water mark and the device's size (see the
 * opening comment); capacity is read on the first allocation. */
static size_t live, live_peak, capacity;
static int capacity_read;
static const char *peak_file;

static size_t pages(size_t n)
{
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static void die(const char *what)
{
    fprintf(stderr, "cuda emulation: %s\n", what);
    abort();
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    const char *a = si->si_addr;
    if (arena && a >= arena && a < arena + arena_cap) {
        static const char msg[] = "cuda emulation: host code touched device memory "
                                  "(SIGSEGV inside the emulated device's arena)\n";
        if (write(2, msg, sizeof msg - 1) < 0) {
        }
    }
    signal(sig, SIG_DFL); /* the access faults again, now fatally */
}

static void arena_protect(int prot)
{
    if (used && mprotect(arena, pages(used), prot) != 0)
        die("mprotect of the device arena failed");
}

static FILE *rec_file, *clock_file;
static int rec_state = -1; /* -1 not read yet, 0 off, 1 recording, 2 recording only */

static void rec_init(void)
{
    if (rec_state >= 0)
        return;
    const char *f = getenv("ST_EMU_RECORD"), *only = getenv("ST_EMU_RECORD_ONLY");
    rec_state = 0;
    if (f && *f) {
        rec_file = fopen(f, "a");
        if (!rec_file)
            die("cannot open ST_EMU_RECORD's file");
        rec_state = 1;
    }
    if (only && *only == '1') {
        if (!rec_file)
            die("ST_EMU_RECORD_ONLY=1 needs ST_EMU_RECORD=FILE");
        rec_state = 2;
    }
    const char *c = getenv("ST_EMU_CLOCK");
    if (c && *c) {
        if (!rec_file)
            die("ST_EMU_CLOCK=FILE needs ST_EMU_RECORD=FILE");
        if (!(clock_file = fopen(c, "a")))
            die("cannot open ST_EMU_CLOCK's file");
    }
}

int emu_recording(void)
{
    rec_init();
    return rec_state > 0;
}

int emu_rec_only(void)
{
    rec_init();
    return rec_state == 2;
}

/* One line of the record; flushed at once, so a run that dies later (the
 * emulation aborts on a bad call) still leaves what came before it
 * (unless the clock is kept, which is for whole runs). */
void emu_rec(const char *fmt, ...)
{
    if (!emu_recording())
        return;
    if (clock_file) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        fprintf(clock_file, "%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(rec_file, fmt, ap);
    va_end(ap);
    fputc('\n', rec_file);
    if (!clock_file)
        fflush(rec_file);
}

void emu_dev_open(void)
{
    if (emu_rec_only())
        return;
    if (depth++ == 0)
        arena_protect(PROT_READ | PROT_WRITE);
}

void emu_dev_close(void)
{
    if (emu_rec_only())
        return;
    if (--depth == 0)
        arena_protect(PROT_NONE);
}

static void write_peak(void)
{
    FILE *f = fopen(peak_file, "a");
    if (!f || fprintf(f, "%zu\n", live_peak) < 0 || fclose(f) != 0)
        fprintf(stderr, "cuda emulation: cannot write ST_EMU_DEVICE_PEAK's file %s\n", peak_file);
}

static void capacity_init(void)
{
    capacity_read = 1;
    capacity = SIZE_MAX;
    const char *c = getenv("ST_EMU_DEVICE_MEM");
    if (c && *c) {
        char *end;
        errno = 0;
        const unsigned long long v = strtoull(c, &end, 10);
        if (errno || *end || *c == '-')
            die("ST_EMU_DEVICE_MEM must be a number of bytes");
        capacity = (size_t)v;
    }
    const char *f = getenv("ST_EMU_DEVICE_PEAK");
    if (f && *f) {
        peak_file = f;
        atexit(write_peak);
    }
}

void *emu_dev_alloc_raw(size_t n)
{
    if (!capacity_read)
        capacity_init();
    if (!arena) {
        if (emu_rec_only())
            arena_cap = (size_t)1 << 40;
        arena = mmap(NULL, arena_cap, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
        if (arena == MAP_FAILED)
            die("cannot reserve the device arena");
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigaction(SIGSEGV, &sa, NULL);
    }
    n = n ? (n + 255) / 256 * 256 : 256;
    if (n > arena_cap - used || n > capacity - live)
        return NULL;
    live += n;
    if (live > live_peak)
        live_peak = live;
    char *p = arena + used;
    used += n;
    if (!emu_rec_only()) {
        emu_dev_open();
        memset(p, 0xff, n);
        emu_dev_close();
    }
    emu_dev_register(p, n);
    return p;
}

void emu_dev_register(void *p, size_t n)
{
    if (nblocks == capblocks) {
        capblocks = capblocks ? 2 * capblocks : 256;
        blocks = realloc(blocks, capblocks * sizeof *blocks);
        if (!blocks) {
            fprintf(stderr, "cuda emulation: out of host memory for the block table\n");
            abort();
        }
    }
    blocks[nblocks++] = (struct emu_block){p, n, NULL};
}

/* The block's size, or 0 when p does not start a block. */
size_t emu_dev_unregister(void *p)
{
    for (size_t i = nblocks; i-- > 0;)
        if (blocks[i].p == (char *)p) {
            size_t n = blocks[i].n;
            live -= n;
            emu_race_forget(blocks[i].race);
            blocks[i] = blocks[--nblocks];
            return n;
        }
    return 0;
}

/* Index of the block holding [p, p + n); -2 when p is in a block but the
 * range runs past its end; -1 when p is in none. */
long emu_dev_find(const void *p, size_t n)
{
    const char *c = p;
    for (size_t i = nblocks; i-- > 0;)
        if (c >= blocks[i].p && c < blocks[i].p + blocks[i].n)
            return c + n <= blocks[i].p + blocks[i].n ? (long)i : -2;
    return -1;
}

int emu_dev_contains(const void *p) { return emu_dev_find(p, 1) >= 0; }

/* races.c's record for the block holding p (and the block's size), or NULL
 * when p is in none. */
void **emu_dev_race_slot(const void *p, size_t *bytes)
{
    long i = emu_dev_find(p, 1);
    if (i < 0)
        return NULL;
    *bytes = blocks[i].n;
    return &blocks[i].race;
}
