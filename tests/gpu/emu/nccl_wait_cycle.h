/* One look at the emulated NCCL's board of waits (nccl_waits.c), and the
 * judgement made on it: is there a cycle of waits through this rank, and
 * has it stood since the previous look?  Kept apart from the shared memory
 * and its sequence counts so that nccl_wait_cycle_test.c can hand it looks
 * no scheduler would produce on demand: a cycle seen once, a rank that
 * moved between looks, a cycle this rank is not on. */
#ifndef ST_EMU_NCCL_WAIT_CYCLE_H
#define ST_EMU_NCCL_WAIT_CYCLE_H

#include <stddef.h>
#include <stdint.h>

#define EMU_WAITS_MAX_COMMS 32

/* One rank's slot: 64-bit words only, so that the board copies it word by
 * word with atomic loads and stores. */
struct wait_slot {
    int64_t seq_count;  /* odd while the owner writes; 0 before it publishes */
    int64_t world_rank;
    int64_t waiting;    /* 1 while in agree's wait */
    int64_t colour;     /* the communicator it waits on */
    int64_t nth;        /* the collective it waits at */
    int64_t n_comms;
    struct {
        int64_t colour, index, issued;
    } comm[EMU_WAITS_MAX_COMMS];
};

/* 1, with LINE ("world rank A waits here for world rank B, which waits at
 * its communicator J's collective M for world rank A") when slot ME of
 * LOOK (N slots, one moment's copies) waits on a cycle of waits back to
 * itself, and every slot on that cycle, ME's too, is the same in PREV, the previous
 * look; else 0.  Rank A waits for rank B when A waits at the n-th
 * collective of a communicator B belongs to and B has issued fewer than n
 * there. */
int emu_waits_judge(const struct wait_slot *prev, const struct wait_slot *look, int n, int me,
                    char *line, size_t len);

#endif
