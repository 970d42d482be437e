/* race_host.c's helpers, for race_check.cu: handles travel as integers so
 * that the C side (shim_c.h's runtime) and the C++ side (shim.h's kernels)
 * need not agree on anything but their values. */
#ifndef ST_EMU_RACE_HOST_H
#define ST_EMU_RACE_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uintptr_t rh_stream(int blocking);
uintptr_t rh_event(void);
void rh_record(uintptr_t e, uintptr_t s);
void rh_wait(uintptr_t s, uintptr_t e);
void rh_sync_stream(uintptr_t s);
void rh_sync_device(void);
void *rh_malloc(size_t n);
void *rh_malloc_async(size_t n, uintptr_t s);
void rh_free(void *p);
void rh_free_async(void *p, uintptr_t s);
void rh_memset_async(void *p, size_t n, uintptr_t s);
void rh_to_host_async(void *host, const void *dev, size_t n, uintptr_t s);
void rh_to_host(void *host, const void *dev, size_t n);

#ifdef __cplusplus
}
#endif

#endif
