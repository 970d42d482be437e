/* The emulated device's streams, events and the runtime trace (see
 * shim_c.h), linked only into the emulated shardtrain.
 *
 * The emulation runs every call to completion in issue order, so streams
 * and events change nothing it computes; what it models exactly is what
 * the code asks of them, so tests can check it without a GPU (and
 * races.c, whether they order every device operation as a GPU needs):
 *   - stream priorities: cudaDeviceGetStreamPriorityRange reports an H100's
 *     range (least 0, greatest -5), and cudaStreamCreateWithPriority clamps
 *     a request into it, as the runtime does; cudaStreamCreateWithFlags
 *     gives the default priority, 0;
 *   - every stream and event is a distinct handle (a small number, never
 *     dereferenced), and one that was never created or was destroyed is
 *     refused, so a mix-up of handles fails here;
 *   - synchronisation: cudaDeviceSynchronize, cudaStreamSynchronize,
 *     cudaEventRecord and cudaStreamWaitEvent are counted and traced.
 * ST_EMU_TRACE=PREFIX appends one line per such call (and per collective
 * of the emulated NCCL, nccl_mpi.c) to PREFIX.PID:
 *   priority_range LEAST GREATEST
 *   stream S priority P          (creation)
 *   sync_device
 *   sync_stream S
 *   record E S / wait S E
 *   comm C size N                (nccl_mpi.c: the process's C-th communicator)
 *   nccl OP C S COUNT ELEM       (OP: all_gather, reduce_scatter, all_reduce;
 *                                 ELEM: bytes per element)
 *   memset BYTES                 (shim_c.h: cudaMemsetAsync)
 *   race_check OPS ACCESSES ACROSS  (races.c, at exit: what it checked)
 * One file per process, so ranks of one run never interleave lines. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void emu_trace(const char *fmt, ...);
int emu_stream_new(int priority);
int emu_stream_known(uintptr_t s);
void emu_stream_gone(uintptr_t s);
int emu_event_new(void);
int emu_event_known(uintptr_t e);
void emu_event_gone(uintptr_t e);

enum { EMU_MAX_HANDLES = 4096 };
/* Handles are 1..n; index 0 is the legacy default stream (NULL). */
static unsigned char stream_live[EMU_MAX_HANDLES], event_live[EMU_MAX_HANDLES];
static int n_streams, n_events;

static FILE *trace_file(void)
{
    static FILE *f;
    static int tried;
    if (!tried) {
        tried = 1;
        const char *prefix = getenv("ST_EMU_TRACE");
        if (prefix && *prefix) {
            char path[4096];
            snprintf(path, sizeof path, "%s.%ld", prefix, (long)getpid());
            f = fopen(path, "a");
            if (!f) {
                fprintf(stderr, "cuda emulation: cannot open the trace %s\n", path);
                abort();
            }
            /* Line-buffered: an aborted rank still leaves what it did. */
            setvbuf(f, NULL, _IOLBF, 0);
        }
    }
    return f;
}

void emu_trace(const char *fmt, ...)
{
    FILE *f = trace_file();
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
}

static int new_handle(unsigned char *live, int *n, const char *what)
{
    if (*n + 1 >= EMU_MAX_HANDLES) {
        fprintf(stderr, "cuda emulation: more than %d %s created\n", EMU_MAX_HANDLES - 1,
                what);
        abort();
    }
    live[++*n] = 1;
    return *n;
}

int emu_stream_new(int priority)
{
    int s = new_handle(stream_live, &n_streams, "streams");
    emu_trace("stream %d priority %d", s, priority);
    return s;
}

/* The legacy default stream (0) always exists. */
int emu_stream_known(uintptr_t s)
{
    return s == 0 || (s < EMU_MAX_HANDLES && stream_live[s]);
}

void emu_stream_gone(uintptr_t s)
{
    if (s < EMU_MAX_HANDLES)
        stream_live[s] = 0;
}

int emu_event_new(void)
{
    return new_handle(event_live, &n_events, "events");
}

int emu_event_known(uintptr_t e)
{
    return e && e < EMU_MAX_HANDLES && event_live[e];
}

void emu_event_gone(uintptr_t e)
{
    if (e < EMU_MAX_HANDLES)
        event_live[e] = 0;
}
