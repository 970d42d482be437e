/* The emulated NCCL's board of waits: each rank publishes, in an MPI
 * shared-memory window, which of its communicators' collectives it is
 * waiting at, and how many collectives it has issued on each of its
 * communicators.  agree (nccl_mpi.c) reads the board when its peers are
 * late.  Rank A waits for rank B when A waits at the n-th collective of a
 * communicator that B belongs to and B has issued fewer than n there.  A
 * cycle of such waits can never resolve: every rank on it is blocked in
 * agree until the next one issues, and that is the deadlock NCCL may fall
 * into when ranks issue two communicators' collectives in different orders
 * (issue 13's hybrid_shard risk).  So agree names the cycle at once instead
 * of waiting out ST_EMU_NCCL_WAIT_S, which is left for peers that never
 * issue at all.
 *
 * Why the board cannot invent a cycle: each slot is written only by its
 * rank, under a sequence count (a seqlock: odd while it writes), and read
 * whole; nccl_wait_cycle.c reports a cycle only when two looks a quarter of
 * a second apart saw it with the same sequence counts on every rank of it.
 *
 * Only ranks that share one node can share the window; the emulation runs
 * every rank on the machine of make check.  Elsewhere the board is off and
 * the wait limit alone applies. */
#include "nccl_waits.h"
#include "nccl_wait_cycle.h"

#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOT_WORDS (sizeof(struct wait_slot) / sizeof(int64_t))

static int board_on, board_size, board_me;
static struct wait_slot **board; /* every node rank's slot, mapped here */
static struct wait_slot mine;    /* what this rank publishes */
static struct wait_slot *seen;   /* the previous look at the board (all
                                    zero before the first: no count is 0
                                    once the slot has been published) */

/* Copies this rank's state to its slot under the sequence count. */
static void publish(void)
{
    if (!board_on)
        return;
    int64_t *dst = (int64_t *)board[board_me];
    const int64_t *src = (const int64_t *)&mine;
    mine.seq_count += 1; /* odd: being written */
    __atomic_store_n(&dst[0], mine.seq_count, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    for (size_t w = 1; w < SLOT_WORDS; w++)
        __atomic_store_n(&dst[w], src[w], __ATOMIC_RELAXED);
    mine.seq_count += 1; /* even: whole */
    __atomic_store_n(&dst[0], mine.seq_count, __ATOMIC_RELEASE);
}

void emu_waits_init(void)
{
    MPI_Comm node;
    int world = 0, me = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return;
    int size = 0;
    MPI_Comm_size(node, &size);
    board = calloc((size_t)size, sizeof *board);
    seen = calloc((size_t)size, sizeof *seen);
    /* Every rank takes the same branch, so none is left waiting in a
     * collective the others skip: the board goes on when the world is one
     * node and every rank has its host memory. */
    int ready = size == world && board && seen, all_ready = 0;
    MPI_Allreduce(&ready, &all_ready, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all_ready) {
        free(board), free(seen);
        board = NULL, seen = NULL;
        MPI_Comm_free(&node);
        return;
    }
    /* A failed window aborts the job (shardtrain's watchdog makes the
     * world's errors return, and node inherited that), so no rank returns
     * from here without the others. */
    MPI_Comm_set_errhandler(node, MPI_ERRORS_ARE_FATAL);
    struct wait_slot *own = NULL;
    MPI_Win win;
    MPI_Win_allocate_shared((MPI_Aint)sizeof *own, (int)sizeof(int64_t), MPI_INFO_NULL, node,
                            &own, &win);
    for (int r = 0; r < size; r++) {
        MPI_Aint bytes = 0;
        int unit = 0;
        void *base = NULL;
        MPI_Win_shared_query(win, r, &bytes, &unit, &base);
        board[r] = base;
    }
    MPI_Comm_rank(node, &board_me);
    board_size = size;
    board_on = 1;
    mine.world_rank = me;
    publish(); /* every word of the slot: the window starts undefined */
    /* Every slot holds its rank before anyone reads the board. */
    MPI_Barrier(node);
    /* The window lives until the process ends: freeing it is collective,
     * and a rank that aborts in agree never gets there. */
}

/* A consistent copy of rank r's slot. */
static void read_slot(int r, struct wait_slot *out)
{
    const int64_t *src = (const int64_t *)board[r];
    int64_t *dst = (int64_t *)out;
    for (;;) {
        int64_t before = __atomic_load_n(&src[0], __ATOMIC_ACQUIRE);
        if (before & 1)
            continue;
        for (size_t w = 1; w < SLOT_WORDS; w++)
            dst[w] = __atomic_load_n(&src[w], __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&src[0], __ATOMIC_RELAXED) == before) {
            dst[0] = before;
            return;
        }
    }
}

void emu_waits_comm(int colour, int index)
{
    if (!board_on)
        return;
    if (mine.n_comms == EMU_WAITS_MAX_COMMS) {
        /* More communicators than a slot holds: stop looking for cycles
         * (the wait limit still applies) rather than miss a member. */
        board_on = 0;
        return;
    }
    mine.comm[mine.n_comms].colour = colour;
    mine.comm[mine.n_comms].index = index;
    mine.comm[mine.n_comms].issued = 0;
    mine.n_comms++;
    publish();
}

/* This rank's entry for communicator colour, or -1: not a member. */
static int own_comm(int64_t colour)
{
    for (int i = 0; i < mine.n_comms; i++)
        if (mine.comm[i].colour == colour)
            return i;
    return -1;
}

void emu_waits_begin(int colour, long seq)
{
    if (!board_on)
        return;
    int i = own_comm(colour);
    if (i >= 0)
        mine.comm[i].issued = seq;
    mine.waiting = 1;
    mine.colour = colour;
    mine.nth = seq;
    publish();
}

void emu_waits_end(void)
{
    if (!board_on)
        return;
    mine.waiting = 0;
    publish();
}

int emu_waits_cycle(char *line, size_t n)
{
    if (!board_on || !mine.waiting)
        return 0;
    struct wait_slot *look = calloc((size_t)board_size, sizeof *look);
    if (!look)
        return 0;
    for (int r = 0; r < board_size; r++)
        read_slot(r, &look[r]);
    look[board_me] = mine;
    int stood = emu_waits_judge(seen, look, board_size, board_me, line, n);
    memcpy(seen, look, (size_t)board_size * sizeof *look);
    free(look);
    return stood;
}
