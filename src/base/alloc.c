/* Tracking allocator: a small header in front of each block remembers its
 * size and category so st_free needs no size argument and the counters stay
 * exact.  Single-threaded by design: allocation happens outside OpenMP
 * regions. */
#include "base/alloc.h"
#include "base/log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ST_ALIGN 64

typedef struct {
    size_t bytes;
    int cat;
    uint32_t magic;
} block_header;

#define HEADER_MAGIC 0x5354414cu /* "STAL" */
/* Header padded to the alignment so the user pointer stays aligned. */
#define HEADER_SPACE ST_ALIGN

static size_t mem_current[ST_MEM_NCAT];
static size_t mem_total;
static size_t mem_peak;

void *st_alloc(size_t bytes, st_mem_cat cat)
{
    if ((int)cat < 0 || cat >= ST_MEM_NCAT)
        st_bug("bad memory category %d", (int)cat);
    size_t total = bytes + HEADER_SPACE;
    /* Out of memory is fatal: st_alloc's callers (the engine, the kernels,
     * mid-step) have no error path, see alloc.h. */
    if (total < bytes)
        st_fatal("allocation of %zu bytes overflows", bytes);
    total = (total + ST_ALIGN - 1) / ST_ALIGN * ST_ALIGN;
    unsigned char *raw = aligned_alloc(ST_ALIGN, total);
    if (!raw)
        st_fatal("out of memory allocating %zu bytes for %s; "
                 "hint: lower train.micro_batch or use a sharded strategy",
                 bytes, st_mem_cat_name(cat));
    memset(raw, 0, total);
    block_header *h = (block_header *)raw;
    h->bytes = bytes;
    h->cat = (int)cat;
    h->magic = HEADER_MAGIC;
    mem_current[cat] += bytes;
    mem_total += bytes;
    if (mem_total > mem_peak)
        mem_peak = mem_total;
    return raw + HEADER_SPACE;
}

void st_free(void *p)
{
    if (!p)
        return;
    unsigned char *raw = (unsigned char *)p - HEADER_SPACE;
    block_header *h = (block_header *)raw;
    if (h->magic != HEADER_MAGIC)
        st_bug("st_free of a block not from st_alloc");
    h->magic = 0;
    mem_current[h->cat] -= h->bytes;
    mem_total -= h->bytes;
    free(raw);
}

void st_mem_count_alloc(st_mem_cat cat, size_t bytes)
{
    if ((int)cat < 0 || cat >= ST_MEM_NCAT)
        st_bug("bad memory category %d", (int)cat);
    mem_current[cat] += bytes;
    mem_total += bytes;
    if (mem_total > mem_peak)
        mem_peak = mem_total;
}

void st_mem_count_free(st_mem_cat cat, size_t bytes)
{
    if ((int)cat < 0 || cat >= ST_MEM_NCAT || mem_current[cat] < bytes)
        st_bug("freeing %zu uncounted bytes of %s", bytes, st_mem_cat_name(cat));
    mem_current[cat] -= bytes;
    mem_total -= bytes;
}

size_t st_mem_current(st_mem_cat cat) { return mem_current[cat]; }
size_t st_mem_total(void) { return mem_total; }
size_t st_mem_state(void)
{
    return mem_current[ST_MEM_PARAMS] + mem_current[ST_MEM_GRADS] +
           mem_current[ST_MEM_OPTIM];
}
size_t st_mem_peak(void) { return mem_peak; }
void st_mem_reset_peak(void) { mem_peak = mem_total; }

const char *st_mem_cat_name(st_mem_cat cat)
{
    static const char *const names[ST_MEM_NCAT] = {
        "parameters", "gradients", "optimizer state", "activations",
        "communication buffers", "other"};
    return (int)cat >= 0 && cat < ST_MEM_NCAT ? names[cat] : "?";
}
