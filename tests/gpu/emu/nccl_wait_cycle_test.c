/* nccl_wait_cycle.c's judgement on looks at the board of waits made by
 * hand, the ones two or three real ranks produce only by chance: a cycle
 * seen in one look only, a rank on it (or this rank) that moved between
 * two looks, a cycle this rank is not on, a dead end before the cycle.
 * Each case states whether the judge must name a cycle and, where it
 * must, the whole line, written from the format nccl_wait_cycle.h
 * documents.  Prints TAP; tests/cuda_races_emu.sh runs it.  Without the
 * two-look rule, "moved_on_cycle" and "moved_self" fail; without the
 * issued counts, "issued_enough"; without the depth-first search's
 * backtracking, "past_a_dead_end". */
#include "nccl_wait_cycle.h"

#include <stdio.h>
#include <string.h>

#define MAX_RANKS 4

/* Rank r of a look: world rank r, sequence count 4 (published twice). */
static void reset(struct wait_slot *look, int n)
{
    memset(look, 0, sizeof *look * (size_t)n);
    for (int r = 0; r < n; r++)
        look[r].world_rank = r, look[r].seq_count = 4;
}

/* s is a member of communicator colour (agree's index), and has issued
 * `issued` collectives there. */
static void member(struct wait_slot *s, int colour, int index, int issued)
{
    int i = (int)s->n_comms++;
    s->comm[i].colour = colour, s->comm[i].index = index, s->comm[i].issued = issued;
}

/* s has issued its nth collective on colour and waits there. */
static void wait_at(struct wait_slot *s, int colour, int nth)
{
    for (int i = 0; i < s->n_comms; i++)
        if (s->comm[i].colour == colour)
            s->comm[i].issued = nth;
    s->waiting = 1, s->colour = colour, s->nth = nth;
}

/* Two ranks, two communicators over both (colours 10 and 11, indices 1
 * and 2): rank 0 waits at 10's first collective, which rank 1 has not
 * issued; rank 1 at 11's, which rank 0 has not. */
static void crossed_pair(struct wait_slot *look)
{
    reset(look, 2);
    for (int r = 0; r < 2; r++)
        member(&look[r], 10, 1, 0), member(&look[r], 11, 2, 0);
    wait_at(&look[0], 10, 1);
    wait_at(&look[1], 11, 1);
}

/* Three pair communicators, each rank in two: {0,1} colour 20, {1,2}
 * colour 21, {0,2} colour 22 (index 1 for a rank's first, 2 for its
 * second); 0 waits on {0,1}, 1 on {1,2}, 2 on {0,2}. */
static void cycle_of_three(struct wait_slot *look)
{
    reset(look, 3);
    member(&look[0], 20, 1, 0), member(&look[0], 22, 2, 0);
    member(&look[1], 20, 1, 0), member(&look[1], 21, 2, 0);
    member(&look[2], 21, 1, 0), member(&look[2], 22, 2, 0);
    wait_at(&look[0], 20, 1);
    wait_at(&look[1], 21, 1);
    wait_at(&look[2], 22, 1);
}

static int n_run, n_failed;

/* One case: the judge on (prev, look) from slot me must say `want`, and
 * when it names a cycle, the line `line`. */
static void expect(const char *name, const struct wait_slot *prev, const struct wait_slot *look,
                   int n, int me, int want, const char *line)
{
    char got[1024] = "";
    int said = emu_waits_judge(prev, look, n, me, got, sizeof got);
    const char *why = NULL;
    if (said != want)
        why = want ? "named no cycle" : "named a cycle";
    else if (want && strcmp(got, line))
        why = "named the cycle wrongly";
    n_run++;
    if (why) {
        n_failed++;
        printf("not ok %d - %s: %s\n# got:  %s\n# want: %s\n", n_run, name, why, got,
               want ? line : "(none)");
    } else {
        printf("ok %d - %s: %s\n", n_run, name, want ? got : "no cycle");
    }
}

int main(void)
{
    struct wait_slot prev[MAX_RANKS], look[MAX_RANKS], zero[MAX_RANKS];
    memset(zero, 0, sizeof zero);
    printf("1..12\n");

    crossed_pair(look);
    memcpy(prev, look, sizeof look);
    expect("crossed_pair", prev, look, 2, 0, 1,
           "world rank 0 waits here for world rank 1, which waits at its communicator 2's "
           "collective 1 for world rank 0");
    expect("crossed_pair_other_side", prev, look, 2, 1, 1,
           "world rank 1 waits here for world rank 0, which waits at its communicator 1's "
           "collective 1 for world rank 1");
    expect("first_look", zero, look, 2, 0, 0, NULL);

    /* The same states, but rank 1 (then rank 0) published between the
     * looks: it may have left its wait and come back to another. */
    prev[1].seq_count = 2;
    expect("moved_on_cycle", prev, look, 2, 0, 0, NULL);
    memcpy(prev, look, sizeof look);
    prev[0].seq_count = 2;
    expect("moved_self", prev, look, 2, 0, 0, NULL);

    crossed_pair(look);
    look[1].comm[0].issued = 1; /* rank 1 has issued 10's first too */
    expect("issued_enough", look, look, 2, 0, 0, NULL);
    crossed_pair(look);
    look[1].n_comms = 1, look[1].comm[0] = look[1].comm[1]; /* rank 1 not in 10 */
    expect("not_a_member", look, look, 2, 0, 0, NULL);
    crossed_pair(look);
    look[1].waiting = 0;
    expect("peer_not_waiting", look, look, 2, 0, 0, NULL);

    cycle_of_three(look);
    expect("cycle_of_three", look, look, 3, 0, 1,
           "world rank 0 waits here for world rank 1, which waits at its communicator 2's "
           "collective 1 for world rank 2, which waits at its communicator 2's collective 1 "
           "for world rank 0");

    /* Rank 0 waits at a communicator over all three (colour 30), for
     * ranks 1 and 2; 1 computes, not waiting; 2 waits on {0,2} (colour
     * 31), which 0 has not issued.  The way through 1 is a dead end; the
     * cycle runs through 2. */
    reset(look, 3);
    for (int r = 0; r < 3; r++)
        member(&look[r], 30, 1, 0);
    member(&look[0], 31, 2, 0), member(&look[2], 31, 2, 0);
    wait_at(&look[0], 30, 1);
    wait_at(&look[2], 31, 1);
    expect("past_a_dead_end", look, look, 3, 0, 1,
           "world rank 0 waits here for world rank 2, which waits at its communicator 2's "
           "collective 1 for world rank 0");

    /* Ranks 1 and 2 cross each other (colours 40, 41); rank 0 waits for 1
     * on {0,1} (colour 42).  The cycle is theirs to name, not 0's. */
    reset(look, 3);
    member(&look[1], 40, 1, 0), member(&look[1], 41, 2, 0);
    member(&look[2], 40, 1, 0), member(&look[2], 41, 2, 0);
    member(&look[0], 42, 1, 0), member(&look[1], 42, 3, 0);
    wait_at(&look[1], 40, 1);
    wait_at(&look[2], 41, 1);
    wait_at(&look[0], 42, 1);
    expect("cycle_elsewhere", look, look, 3, 0, 0, NULL);
    expect("cycle_elsewhere_named_by_its_rank", look, look, 3, 1, 1,
           "world rank 1 waits here for world rank 2, which waits at its communicator 2's "
           "collective 1 for world rank 1");
    return n_failed ? 1 : 0;
}
