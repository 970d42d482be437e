/* The tracking allocator.  Every allocation of model state, gradients,
 * optimizer state and activations goes through here, tagged with what it
 * holds, so that state_bytes and peak_bytes in the metrics are exact counts
 * of what this rank holds rather than estimates.  A device backend
 * (kernels_cuda.c) counts its device memory into the same counters. */
#ifndef ST_ALLOC_H
#define ST_ALLOC_H

#include <stddef.h>

typedef enum {
    ST_MEM_PARAMS,   /* master parameters (and working copies) */
    ST_MEM_GRADS,    /* gradients */
    ST_MEM_OPTIM,    /* optimizer moments */
    ST_MEM_ACTS,     /* activations and their gradients */
    ST_MEM_COMM,     /* communication and gathered-unit buffers */
    ST_MEM_OTHER,    /* everything else tracked */
    ST_MEM_NCAT
} st_mem_cat;

/* Zeroed, 64-byte aligned.  Out of memory prints one error line and exits
 * with ST_EXIT_FAILURE (st_fatal): there is no sensible recovery mid-step. */
void *st_alloc(size_t bytes, st_mem_cat cat);
void st_free(void *p);

/* For memory another allocator hands out (a device backend's): counted in
 * the same categories and peak as st_alloc's, so peak_bytes means the same
 * on every backend.  The caller remembers each block's size and category. */
void st_mem_count_alloc(st_mem_cat cat, size_t bytes);
void st_mem_count_free(st_mem_cat cat, size_t bytes);

size_t st_mem_current(st_mem_cat cat);
size_t st_mem_total(void);       /* all categories */
size_t st_mem_state(void);       /* params + grads + optimizer */
size_t st_mem_peak(void);        /* high-water mark of st_mem_total() */
void st_mem_reset_peak(void);    /* peak := current total */
const char *st_mem_cat_name(st_mem_cat cat);

#endif
