/* The emulated device's stream concurrency: a happens-before check of every
 * device operation of the emulated shardtrain, linked beside devmem.c and
 * streams.c (build_shardtrain.sh).
 *
 * Why.  The emulation runs each operation to completion when the host
 * enqueues it, so work on two streams never overlaps here, and a missing
 * event or synchronisation computes the right numbers.  On a GPU the same
 * program races: a kernel on the compute stream reads a gathered buffer
 * before the all-gather on the communication stream has written it, a
 * buffer is freed on one stream while another still reads it, a copy to
 * the host reads a result still being computed.  This file finds those
 * without a GPU, by the rules CUDA promises rather than by timing:
 *   - operations on one stream happen in the order they were enqueued;
 *   - cudaEventRecord(E, S) captures what S has enqueued so far, and
 *     cudaStreamWaitEvent(T, E) orders T's later operations after it (the
 *     last record before the wait counts; a never-recorded event orders
 *     nothing);
 *   - cudaStreamSynchronize(S) and cudaDeviceSynchronize order everything
 *     the host enqueues afterwards, on any stream, after what they waited
 *     for; so do the synchronous cudaMemcpy (after the legacy stream's
 *     work) and cudaFree (after the whole device's);
 *   - the legacy default stream (handle 0) waits for the earlier work of
 *     every blocking stream, and a blocking stream waits for the legacy
 *     stream's; a cudaStreamNonBlocking stream (what shardtrain creates)
 *     does neither.
 * Each stream, each recorded event and the host carry a vector clock (one
 * counter per stream), the usual way to decide happens-before between
 * concurrent agents.  Each operation ticks its stream's counter, and each
 * device block (devmem.c) remembers its last writer and the readers since
 * then.  An access that is not ordered after a conflicting earlier one
 * (a read after an unordered write, a write after an unordered read or
 * write) aborts, naming both operations and their streams.
 *
 * What an operation touches: a kernel's pointer arguments (shim.h; a
 * pointer to const is read, any other pointer written, which kernels
 * declare honestly here), a cuBLASLt product's operands (gemm_host.cpp, by
 * its epilogue), a copy's or memset's device side, an NCCL collective's
 * send and receive buffers (nccl_mpi.c), cudaMallocAsync (a write on its
 * stream: another stream may use the block only once ordered after it)
 * and cudaFreeAsync (a write: every use must be ordered before it).
 * Granularity is the whole device block, as a kernel's extent is not known
 * from its pointer: two streams writing disjoint halves of one block are
 * reported too (shardtrain gives each buffer its own block).
 *
 * Not modelled: host memory (a host read of a buffer an asynchronous copy
 * is still filling).  That race needs pinned host memory, and shardtrain
 * has none: no cudaMallocHost, cudaHostAlloc or cudaHostRegister (shim_c.h
 * maps none of them, so build_shardtrain.sh's nm check would fail a
 * binary that called one), and CUDA copies to pageable memory before
 * cudaMemcpyAsync returns, from it into staging before it returns.  Also
 * not modelled: pointers inside structs passed by value (none of cuda/'s
 * kernels takes one), and the ranks' ordering across processes (each
 * rank's device is checked alone; NCCL's is MPI's here). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "races.h"

/* devmem.c's table: the record slot of the block holding p, and its size. */
void **emu_dev_race_slot(const void *p, size_t *bytes);
/* streams.c's trace. */
void emu_trace(const char *fmt, ...);

typedef struct {
    uint64_t *c; /* c[i]: how many of stream i's operations are ordered before */
    size_t n;
} vclock;

/* The streams' clocks (index 0 the legacy stream), the events', the
 * host's, and which streams are blocking. */
static vclock *svc, *evc;
static unsigned char *blocking;
static size_t nsvc, nevc;
static vclock host;

static void die_oom(void)
{
    fprintf(stderr, "cuda emulation: out of host memory for the race check\n");
    abort();
}

static void vc_grow(vclock *v, size_t n)
{
    if (v->n >= n)
        return;
    uint64_t *c = realloc(v->c, n * sizeof *c);
    if (!c)
        die_oom();
    memset(c + v->n, 0, (n - v->n) * sizeof *c);
    v->c = c;
    v->n = n;
}

static void vc_join(vclock *into, const vclock *from)
{
    vc_grow(into, from->n);
    for (size_t i = 0; i < from->n; i++)
        if (from->c[i] > into->c[i])
            into->c[i] = from->c[i];
}

static uint64_t vc_at(const vclock *v, size_t i) { return i < v->n ? v->c[i] : 0; }

/* Grow a table of clocks to hold index i. */
static vclock *clock_of(vclock **table, size_t *n, size_t i)
{
    if (i >= *n) {
        size_t m = *n ? *n : 8;
        while (m <= i)
            m *= 2;
        vclock *t = realloc(*table, m * sizeof *t);
        if (!t)
            die_oom();
        memset(t + *n, 0, (m - *n) * sizeof *t);
        if (table == &svc) {
            unsigned char *b = realloc(blocking, m);
            if (!b)
                die_oom();
            memset(b + *n, 0, m - *n);
            blocking = b;
        }
        *table = t;
        *n = m;
    }
    return &(*table)[i];
}

static vclock *stream_clock(uintptr_t s) { return clock_of(&svc, &nsvc, s); }

void emu_race_stream_new(uintptr_t s, int is_blocking)
{
    stream_clock(s);
    blocking[s] = (unsigned char)(is_blocking != 0);
}

/* What the check saw, for the trace (streams.c, ST_EMU_TRACE) at exit:
 *   race_check OPERATIONS ACCESSES ORDERED_ACROSS
 * ORDERED_ACROSS counts the accesses that conflict with an earlier one on
 * another stream and were found ordered after it (an event wait or a
 * synchronisation between them), so a test can see that a run's streams
 * really depended on each other and the check followed them. */
static unsigned long long n_ops, n_accesses, n_ordered_across;

static void trace_counts(void)
{
    emu_trace("race_check %llu %llu %llu", n_ops, n_accesses, n_ordered_across);
}

/* The operation being enqueued: its stream, its number on that stream
 * (1-based), and its name, for messages. */
static uintptr_t cur_stream;
static uint64_t cur_tick;
static const char *cur_what = "?";
static int cur_valid; /* an operation was enqueued (none yet: nothing to check) */

void emu_race_op(uintptr_t s, const char *what)
{
    vclock *v = stream_clock(s);
    vc_join(v, &host); /* what the host knows finished is finished for it */
    if (s == 0) {
        for (size_t i = 1; i < nsvc; i++)
            if (blocking[i])
                vc_join(v, &svc[i]);
    } else if (blocking[s]) {
        vc_join(v, &svc[0]); /* s > 0 exists, so the table holds 0 */
    }
    vc_grow(v, s + 1);
    cur_stream = s;
    cur_tick = ++v->c[s];
    cur_what = what;
    if (!cur_valid)
        atexit(trace_counts);
    cur_valid = 1;
    n_ops++;
}

/* One access to a block: the operation, where it ran. */
typedef struct {
    uintptr_t stream;
    uint64_t tick;
    const char *what;
} access;

typedef struct {
    int written;
    access writer;
    access *readers; /* at most one per stream: its latest read */
    size_t nreaders, cap;
} block_state;

static void report(const access *earlier, int earlier_wrote, const void *p, size_t bytes,
                   int write)
{
    fprintf(stderr,
            "cuda emulation: race: %s (stream %lu, its operation %llu) %s the device block "
            "at %p (%zu bytes) that %s (stream %lu, its operation %llu) %s, and no event "
            "wait or synchronisation orders the two: on a GPU they may overlap\n",
            cur_what, (unsigned long)cur_stream, (unsigned long long)cur_tick,
            write ? "writes" : "reads", p, bytes, earlier->what, (unsigned long)earlier->stream,
            (unsigned long long)earlier->tick, earlier_wrote ? "wrote" : "read");
    abort();
}

/* Whether the operation being enqueued comes after a. */
static int ordered(const access *a)
{
    if (vc_at(&svc[cur_stream], a->stream) < a->tick)
        return 0;
    if (a->stream != cur_stream)
        n_ordered_across++;
    return 1;
}

void emu_race_access(const void *p, int write)
{
    size_t bytes = 0;
    void **slot = p ? emu_dev_race_slot(p, &bytes) : NULL;
    if (!slot || !cur_valid)
        return; /* not device memory: the callers' own checks say so */
    n_accesses++;
    block_state *b = *slot;
    if (!b) {
        if (!(b = calloc(1, sizeof *b)))
            die_oom();
        *slot = b;
    }
    if (b->written && !ordered(&b->writer))
        report(&b->writer, 1, p, bytes, write);
    const access me = {cur_stream, cur_tick, cur_what};
    if (write) {
        for (size_t i = 0; i < b->nreaders; i++)
            if (!ordered(&b->readers[i]))
                report(&b->readers[i], 0, p, bytes, write);
        b->written = 1;
        b->writer = me;
        b->nreaders = 0;
        return;
    }
    for (size_t i = 0; i < b->nreaders; i++)
        if (b->readers[i].stream == cur_stream) {
            b->readers[i] = me;
            return;
        }
    if (b->nreaders == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 2;
        access *r = realloc(b->readers, cap * sizeof *r);
        if (!r)
            die_oom();
        b->readers = r;
        b->cap = cap;
    }
    b->readers[b->nreaders++] = me;
}

void emu_race_forget(void *state)
{
    block_state *b = state;
    if (b)
        free(b->readers);
    free(b);
}

void emu_race_record(uintptr_t e, uintptr_t s)
{
    vclock *v = stream_clock(s);
    vc_join(v, &host);
    vclock *ev = clock_of(&evc, &nevc, e);
    ev->n = 0; /* a record replaces what the event held */
    vc_join(ev, v);
}

void emu_race_wait(uintptr_t s, uintptr_t e)
{
    vclock *v = stream_clock(s);
    const vclock *ev = clock_of(&evc, &nevc, e);
    vc_join(v, &host);
    vc_join(v, ev);
}

void emu_race_sync_stream(uintptr_t s)
{
    vc_join(&host, stream_clock(s));
}

void emu_race_sync_device(void)
{
    for (size_t i = 0; i < nsvc; i++)
        vc_join(&host, &svc[i]);
}
