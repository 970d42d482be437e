/* Shared by the engine's two files, fsdp.c (gathering, the schedule's
 * execution, reductions, the optimizer) and fsdp_state.c (set-up, teardown,
 * host access); not for use outside engine/. */
#ifndef ST_FSDP_IMPL_H
#define ST_FSDP_IMPL_H

#include "engine/fsdp.h"

/* Wait for unit u's gathers if in flight and free what they brought: the
 * unit is sharded again.  Returns an exit status. */
int st_fsdp_release_unit(st_fsdp *f, int u);

#endif
