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
 * whole.  A cycle is reported only when the previous look, a quarter of a
 * second or more earlier, saw the same cycle with the same sequence counts
 * on every rank of it.  Then every one of those ranks held its state over a
 * common moment, so the cycle existed as a whole, and a blocked rank does
 * not move by itself.
 *
 * Only ranks that share one node can share the window; the emulation runs
 * every rank on the machine of make check.  Elsewhere the board is off and
 * the wait limit alone applies. */
#include "nccl_waits.h"

#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COMMS 32

/* One rank's slot: 64-bit words only, so that it is copied word by word
 * with atomic loads and stores. */
struct wait_slot {
    int64_t seq_count;  /* odd while the owner writes */
    int64_t world_rank;
    int64_t waiting;    /* 1 while in agree's wait */
    int64_t colour;     /* the communicator it waits on */
    int64_t nth;        /* the collective it waits at */
    int64_t n_comms;
    struct {
        int64_t colour, index, issued;
    } comm[MAX_COMMS];
};

#define SLOT_WORDS (sizeof(struct wait_slot) / sizeof(int64_t))

static int board_on, board_size, board_me;
static struct wait_slot **board; /* every node rank's slot, mapped here */
static struct wait_slot mine;    /* what this rank publishes */
static struct wait_slot *seen;   /* the previous look at the board (all
                                    zero before the first: no count is 0
                                    once the slot has been published) */

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
    mine.world_rank = me;
    memset(own, 0, sizeof *own);
    own->world_rank = me;
    /* Every slot holds its rank before anyone reads the board. */
    MPI_Barrier(node);
    board_on = 1;
    /* The window lives until the process ends: freeing it is collective,
     * and a rank that aborts in agree never gets there. */
}

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
    if (mine.n_comms == MAX_COMMS) {
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

/* The entry of slot s for communicator colour, or -1: s is not a member. */
static int comm_of(const struct wait_slot *s, int64_t colour)
{
    for (int i = 0; i < s->n_comms && i < MAX_COMMS; i++)
        if (s->comm[i].colour == colour)
            return i;
    return -1;
}

void emu_waits_begin(int colour, long seq)
{
    if (!board_on)
        return;
    int i = comm_of(&mine, colour);
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

/* Does a waits for b (both slots of the same look)? */
static int waits_for(const struct wait_slot *a, const struct wait_slot *b)
{
    if (!a->waiting || a == b)
        return 0;
    int i = comm_of(b, a->colour);
    return i >= 0 && b->comm[i].issued < a->nth;
}

/* A path of waits from node `at` back to this rank, depth-first; path[]
 * gets the nodes after this rank.  Returns the path's length, 0 if none. */
static int path_home(const struct wait_slot *look, int at, int depth, int *path, char *visited)
{
    for (int r = 0; r < board_size; r++) {
        if (!waits_for(&look[at], &look[r]))
            continue;
        if (r == board_me)
            return depth;
        if (visited[r])
            continue;
        visited[r] = 1;
        path[depth] = r;
        int n = path_home(look, r, depth + 1, path, visited);
        if (n)
            return n;
    }
    return 0;
}

int emu_waits_cycle(char *line, size_t n)
{
    if (!board_on || !mine.waiting)
        return 0;
    struct wait_slot *look = calloc((size_t)board_size, sizeof *look);
    int *path = calloc((size_t)board_size, sizeof *path);
    char *visited = calloc((size_t)board_size, 1);
    if (!look || !path || !visited) {
        free(look), free(path), free(visited);
        return 0;
    }
    for (int r = 0; r < board_size; r++)
        read_slot(r, &look[r]);
    look[board_me] = mine;
    int len = path_home(look, board_me, 0, path, visited);
    /* The same cycle, unchanged since the previous look? */
    int stood = len > 0;
    for (int k = 0; k < len && stood; k++) {
        int r = path[k];
        stood = !memcmp(&seen[r], &look[r], sizeof look[r]);
    }
    if (stood) {
        size_t at = (size_t)snprintf(line, n, "world rank %lld waits here for world rank %lld",
                                     (long long)mine.world_rank,
                                     (long long)look[path[0]].world_rank);
        for (int k = 0; k < len && at < n; k++) {
            const struct wait_slot *s = &look[path[k]];
            int i = comm_of(s, s->colour);
            long long next = k + 1 < len ? look[path[k + 1]].world_rank : mine.world_rank;
            at += (size_t)snprintf(line + at, n - at,
                                   ", which waits at its communicator %lld's collective %lld "
                                   "for world rank %lld",
                                   (long long)(i >= 0 ? s->comm[i].index : -1),
                                   (long long)s->nth, next);
        }
    }
    memcpy(seen, look, (size_t)board_size * sizeof *look);
    free(look), free(path), free(visited);
    return stood;
}
