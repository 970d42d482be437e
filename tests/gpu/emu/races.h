/* The race check's interface (races.c, which says what it checks and
 * why), for the C side of the emulation: shim_c.h's runtime calls,
 * nccl_mpi.c's collectives and devmem.c's blocks.  shim.h and
 * gemm_host.cpp, C++ files that must also build without races.c, declare
 * the calls they make weakly instead. */
#ifndef ST_EMU_RACES_H
#define ST_EMU_RACES_H

#include <stdint.h>

/* A stream was created (blocking: not cudaStreamNonBlocking). */
void emu_race_stream_new(uintptr_t s, int blocking);
/* An operation named what is enqueued on stream s (0: the legacy stream);
 * the accesses that follow are its. */
void emu_race_op(uintptr_t s, const char *what);
/* The current operation reads (write 0) or writes the device block that
 * holds p; nothing for a pointer outside every block. */
void emu_race_access(const void *p, int write);
/* cudaEventRecord(e, s) and cudaStreamWaitEvent(s, e). */
void emu_race_record(uintptr_t e, uintptr_t s);
void emu_race_wait(uintptr_t s, uintptr_t e);
/* The host waited for stream s, or for the whole device. */
void emu_race_sync_stream(uintptr_t s);
void emu_race_sync_device(void);
/* devmem.c: a block's record, freed with the block. */
void emu_race_forget(void *state);

#endif
