/* The judgement on one look at the board of waits (see nccl_wait_cycle.h):
 * find a cycle of waits through this rank, depth first, and report it only
 * if the previous look saw the same cycle with the same sequence counts on
 * every rank of it.  Why two looks: the board's slots are copied one after
 * another, so one look can pair rank A's state before it moved with rank
 * B's after, and show a cycle that never existed.  When every slot on the
 * cycle is unchanged across two looks, each of those ranks held its state
 * over the moment between them, so the cycle existed as a whole; and a
 * blocked rank does not move by itself, so it cannot resolve. */
#include "nccl_wait_cycle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The entry of slot s for communicator colour, or -1: s is not a member. */
static int comm_of(const struct wait_slot *s, int64_t colour)
{
    for (int i = 0; i < s->n_comms && i < EMU_WAITS_MAX_COMMS; i++)
        if (s->comm[i].colour == colour)
            return i;
    return -1;
}

/* Does a wait for b (both slots of the same look)? */
static int waits_for(const struct wait_slot *a, const struct wait_slot *b)
{
    if (!a->waiting || a == b)
        return 0;
    int i = comm_of(b, a->colour);
    return i >= 0 && b->comm[i].issued < a->nth;
}

/* A path of waits from slot `at` back to slot me; path[] gets the slots
 * after me.  Returns the path's length, 0 if none. */
static int path_home(const struct wait_slot *look, int n, int me, int at, int depth, int *path,
                     char *visited)
{
    for (int r = 0; r < n; r++) {
        if (!waits_for(&look[at], &look[r]))
            continue;
        if (r == me)
            return depth;
        if (visited[r])
            continue;
        visited[r] = 1;
        path[depth] = r;
        int found = path_home(look, n, me, r, depth + 1, path, visited);
        if (found)
            return found;
    }
    return 0;
}

/* LINE: the cycle of `len` slots after me, named by world rank. */
static void describe(const struct wait_slot *look, int me, const int *path, int len, char *line,
                     size_t n)
{
    size_t at = (size_t)snprintf(line, n, "world rank %lld waits here for world rank %lld",
                                 (long long)look[me].world_rank,
                                 (long long)look[path[0]].world_rank);
    for (int k = 0; k < len && at < n; k++) {
        const struct wait_slot *s = &look[path[k]];
        int i = comm_of(s, s->colour);
        long long next = k + 1 < len ? look[path[k + 1]].world_rank : look[me].world_rank;
        at += (size_t)snprintf(line + at, n - at,
                               ", which waits at its communicator %lld's collective %lld "
                               "for world rank %lld",
                               (long long)(i >= 0 ? s->comm[i].index : -1), (long long)s->nth,
                               next);
    }
}

int emu_waits_judge(const struct wait_slot *prev, const struct wait_slot *look, int n, int me,
                    char *line, size_t len)
{
    if (n < 2 || me < 0 || me >= n || !look[me].waiting)
        return 0;
    int *path = calloc((size_t)n, sizeof *path);
    char *visited = calloc((size_t)n, 1);
    int stood = 0;
    if (path && visited) {
        int cycle = path_home(look, n, me, me, 0, path, visited);
        /* me's own slot too: a look from an earlier wait of this rank says
         * nothing about where it stood since. */
        stood = cycle > 0 && !memcmp(&prev[me], &look[me], sizeof look[0]);
        for (int k = 0; k < cycle && stood; k++)
            stood = !memcmp(&prev[path[k]], &look[path[k]], sizeof look[0]);
        if (stood)
            describe(look, me, path, cycle, line, len);
    }
    free(path), free(visited);
    return stood;
}
