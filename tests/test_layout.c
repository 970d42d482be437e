/* Unit test of st_layout_compute, the arithmetic behind the FSDP process
 * groups.  It is pure, so every strategy and node shape can be checked
 * here without launching ranks: a wrong layout would not crash, it would
 * silently average gradients over the wrong ranks.  For each layout the
 * test checks S and R, each rank's positions, that the shard groups
 * partition the world into consecutive blocks, and that each replicate
 * group holds exactly one rank of every shard group.  Bad layouts must be
 * refused with ST_EXIT_USAGE and a "what; hint" message. */
#include "comm/groups.h"
#include "base/log.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static const char *strat_name(int s) { return st_enum_name("parallel", "strategy", s); }

/* Computes every rank's layout and checks it against the expected S: one
 * TAP line per layout, with the first discrepancy as a diagnostic. */
static void check_layout(const char *what, int world, const int *nodes, int strategy,
                         int64_t shard_size, int want_s)
{
    st_layout *l = calloc((size_t)world, sizeof *l);
    int *seen_shard = calloc((size_t)world, sizeof *seen_shard);
    int *rep_count = calloc((size_t)world * (size_t)world, sizeof *rep_count);
    char err[512], why[600] = "";
    int good = l && seen_shard && rep_count;
    for (int r = 0; good && r < world; r++) {
        int rc = st_layout_compute(world, r, nodes, strategy, shard_size, &l[r], err, sizeof err);
        if (rc) {
            snprintf(why, sizeof why, "rank %d: rc %d: %s", r, rc, err);
            good = 0;
        }
    }
    const int s = want_s, rr = world / want_s;
    for (int r = 0; good && r < world; r++) {
        const st_layout *x = &l[r];
        if (x->world_size != world || x->rank != r || x->shard_size != s ||
            x->replicate_size != rr || x->shard_size * x->replicate_size != world) {
            snprintf(why, sizeof why, "rank %d: world %d S %d R %d (want S %d R %d)", r,
                     x->world_size, x->shard_size, x->replicate_size, s, rr);
            good = 0;
            break;
        }
        /* Shard groups: consecutive blocks, positions in order. */
        if (x->shard_group != r / s || x->shard_rank != r % s ||
            x->shard_group < 0 || x->shard_group >= rr) {
            snprintf(why, sizeof why, "rank %d: shard group %d rank %d", r, x->shard_group,
                     x->shard_rank);
            good = 0;
            break;
        }
        /* Replicate groups: same position in every shard group. */
        if (x->replicate_group != x->shard_rank || x->replicate_rank != x->shard_group) {
            snprintf(why, sizeof why, "rank %d: replicate group %d rank %d", r,
                     x->replicate_group, x->replicate_rank);
            good = 0;
            break;
        }
        /* (shard group, shard rank) must name each rank exactly once. */
        int slot = x->shard_group * s + x->shard_rank;
        if (seen_shard[slot]++) {
            snprintf(why, sizeof why, "slot %d taken twice", slot);
            good = 0;
            break;
        }
        rep_count[x->replicate_group * world + x->shard_group]++;
    }
    /* Every replicate group has exactly one member in each shard group. */
    for (int g = 0; good && g < s; g++)
        for (int sg = 0; good && sg < rr; sg++)
            if (rep_count[g * world + sg] != 1) {
                snprintf(why, sizeof why, "replicate group %d has %d ranks of shard group %d",
                         g, rep_count[g * world + sg], sg);
                good = 0;
            }
    tap_ok(good, "%s %s world %d shard_size %lld: S %d R %d", what, strat_name(strategy),
           world, (long long)shard_size, s, rr);
    if (!good && why[0])
        tap_diag("%s", why);
    free(l);
    free(seen_shard);
    free(rep_count);
}

static void check_refused(const char *what, int world, const int *nodes, int strategy,
                          int64_t shard_size, const char *want)
{
    char err[512] = "";
    st_layout l;
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int rc = st_layout_compute(world, r, nodes, strategy, shard_size, &l, err, sizeof err);
        if (rc != ST_EXIT_USAGE || !strstr(err, "; hint") || !strstr(err, want))
            bad = 1;
    }
    tap_ok(!bad, "refuses %s", what);
    if (bad)
        tap_diag("got: %s (want ST_EXIT_USAGE, \"%s\" and \"; hint\")", err, want);
}

/* nodes[r] for n_nodes nodes of per ranks each, in blocks. */
static int *block_nodes(int n_nodes, int per)
{
    int *n = malloc((size_t)(n_nodes * per) * sizeof *n);
    for (int r = 0; n && r < n_nodes * per; r++)
        n[r] = r / per;
    return n;
}

int main(void)
{
    static const int worlds[] = {1, 2, 3, 4, 6, 8};
    static const int strategies[] = {ST_STRAT_FULL_SHARD, ST_STRAT_SHARD_GRAD_OP,
                                     ST_STRAT_NO_SHARD, ST_STRAT_HYBRID_SHARD};
    for (size_t i = 0; i < sizeof worlds / sizeof *worlds; i++) {
        int w = worlds[i];
        int *one_node = block_nodes(1, w);
        for (size_t k = 0; k < sizeof strategies / sizeof *strategies; k++) {
            int st = strategies[k];
            int want = st == ST_STRAT_NO_SHARD ? 1 : w; /* hybrid on one node = full */
            check_layout("one node", w, one_node, st, 0, want);
        }
        free(one_node);
    }

    /* Hybrid across nodes: nodes x ranks per node; S from the nodes, then
     * the same shape asked for with shard_size. */
    static const int shapes[][2] = {{2, 2}, {2, 4}, {4, 2}, {3, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int nn = shapes[i][0], per = shapes[i][1], w = nn * per;
        int *nodes = block_nodes(nn, per);
        char what[64];
        snprintf(what, sizeof what, "%dx%d nodes", nn, per);
        check_layout(what, w, nodes, ST_STRAT_HYBRID_SHARD, 0, per);
        check_layout(what, w, nodes, ST_STRAT_HYBRID_SHARD, per, per);
        /* shard_size independent of the node size: every divisor works. */
        for (int s = 1; s <= w; s++)
            if (w % s == 0)
                check_layout(what, w, nodes, ST_STRAT_HYBRID_SHARD, s, s);
        /* Non-hybrid strategies ignore the nodes. */
        check_layout(what, w, nodes, ST_STRAT_FULL_SHARD, 0, w);
        check_layout(what, w, nodes, ST_STRAT_NO_SHARD, 0, 1);
        free(nodes);
    }

    /* hybrid with a single-node world and shard_size set. */
    {
        int *nodes = block_nodes(1, 8);
        check_layout("one node", 8, nodes, ST_STRAT_HYBRID_SHARD, 2, 2);
        check_layout("one node", 8, nodes, ST_STRAT_HYBRID_SHARD, 4, 4);
        free(nodes);
    }
    /* Node numbering need not start at 0 or be dense. */
    {
        static const int nodes[] = {7, 7, 3, 3};
        check_layout("nodes 7,7,3,3", 4, nodes, ST_STRAT_HYBRID_SHARD, 0, 2);
    }

    /* Refusals. */
    {
        int *nodes = block_nodes(1, 4);
        check_refused("shard_size 3 with world 4", 4, nodes, ST_STRAT_HYBRID_SHARD, 3,
                      "shard_size");
        check_refused("shard_size 8 with world 4", 4, nodes, ST_STRAT_HYBRID_SHARD, 8,
                      "shard_size");
        free(nodes);
    }
    {
        static const int nodes[] = {0, 0, 1, 1, 1};
        check_refused("nodes with 2 and 3 ranks", 5, nodes, ST_STRAT_HYBRID_SHARD, 0,
                      "same number of ranks");
        check_refused("nodes with 2 and 3 ranks, shard_size 5", 5, nodes,
                      ST_STRAT_HYBRID_SHARD, 5, "same number of ranks");
    }
    {
        static const int nodes[] = {0, 1, 0, 1};
        check_refused("interleaved node ranks 0,1,0,1", 4, nodes, ST_STRAT_HYBRID_SHARD, 0,
                      "consecutive");
        /* With an explicit shard_size the groups no longer follow nodes. */
        check_layout("interleaved nodes", 4, nodes, ST_STRAT_HYBRID_SHARD, 2, 2);
    }
    {
        static const int nodes[] = {0, 0, 0, 0};
        check_refused("unknown strategy", 4, nodes, 99, 0, "strategy");
        char err[64];
        st_layout l;
        tap_ok(st_layout_compute(4, 4, nodes, ST_STRAT_FULL_SHARD, 0, &l, err, sizeof err)
                   == ST_EXIT_USAGE, "refuses a rank outside the world");
    }
    return tap_done();
}
