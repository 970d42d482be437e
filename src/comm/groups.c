/* Process groups (see groups.h): the pure layout arithmetic, the MPI
 * communicators built from it, and their description for the identity
 * line (the hidden `runtime-info` command, cli/cmd_runtime_info.c, shows a
 * launch's identity and grouping before anyone spends a GPU-hour on a job
 * whose ranks do not know who they are).
 *
 * Failure discipline: every check that can fail on some ranks but not on
 * others is followed by an agreement (an all-reduce of the status) before
 * the next collective, so a refusal never becomes a hang. */
#include "st_build.h"

#include "comm/groups.h"
#include "comm/comm_backends.h"
#include "base/log.h"
#include "runtime/watchdog.h"
#include "config/origin.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errn, const char *fmt, ...)
{
    if (errn) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errn, fmt, ap);
        va_end(ap);
    }
    return ST_EXIT_USAGE;
}

/* "1, 2, 4" (the sizes a user may pick), shortened for large worlds. */
static void divisors(int world, char *buf, size_t n)
{
    size_t len = 0;
    int shown = 0;
    buf[0] = 0;
    for (int d = 1; d <= world && len + 16 < n; d++) {
        if (world % d)
            continue;
        if (shown == 8 && d != world) {
            len += (size_t)snprintf(buf + len, n - len, ", ...");
            d = world - 1;  /* jump to the world itself */
            continue;
        }
        len += (size_t)snprintf(buf + len, n - len, "%s%d", shown ? ", " : "", d);
        shown++;
    }
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* hybrid_shard's node checks.  Sorting a copy finds the per-node counts
 * in O(W log W) whatever the node numbering. */
static int node_shape(int world, const int *node_of_rank, int64_t shard_size,
                      int *per_node, char *err, size_t errn)
{
    const char *key = shard_size > 0 ? "parallel.shard_size" : "parallel.strategy";
    int *sorted = malloc((size_t)world * sizeof *sorted);
    if (!sorted)
        return fail(err, errn, "out of memory for the node map of %d ranks; hint: none", world);
    for (int r = 0; r < world; r++) {
        if (node_of_rank[r] < 0) {
            free(sorted);
            return fail(err, errn, "rank %d has no node index (%d); hint: this is a bug "
                        "in the runtime layer, report it", r, node_of_rank[r]);
        }
        sorted[r] = node_of_rank[r];
    }
    qsort(sorted, (size_t)world, sizeof *sorted, cmp_int);
    int first_count = -1, first_node = -1, distinct = 0;
    for (int i = 0; i < world;) {
        int j = i;
        while (j < world && sorted[j] == sorted[i])
            j++;
        distinct++;
        if (first_count < 0) {
            first_count = j - i;
            first_node = sorted[i];
        } else if (j - i != first_count) {
            int node = sorted[i], count = j - i;
            free(sorted);
            return fail(err, errn, "%s: hybrid_shard needs the same number of ranks on "
                        "every node, but node %d has %d and node %d has %d; hint: launch "
                        "the same number of tasks per node (srun --ntasks-per-node, "
                        "mpirun --map-by ppr:N:node)", key, first_node, first_count,
                        node, count);
        }
        i = j;
    }
    free(sorted);
    if (shard_size == 0) {
        /* Shard groups are consecutive rank ranges, so a node can be a
         * shard group only if its ranks are consecutive: each node change
         * along the ranks must be to a node not seen before. */
        int changes = 0;
        for (int r = 1; r < world; r++)
            changes += node_of_rank[r] != node_of_rank[r - 1];
        if (changes != distinct - 1) {
            /* Name the first rank that returns to a node left earlier
             * (quadratic, but only on this error path). */
            int r = 1, back = 0;
            for (; r < world && !back; r++)
                if (node_of_rank[r] != node_of_rank[r - 1])
                    for (int q = 0; q < r - 1 && !back; q++)
                        back = node_of_rank[q] == node_of_rank[r];
            r--;
            return fail(err, errn, "parallel.strategy = hybrid_shard with shard_size 0 "
                        "makes each node a shard group, but the ranks of a node are not "
                        "consecutive (rank %d is on node %d again after rank %d on node "
                        "%d); hint: place ranks by node in blocks (srun "
                        "--distribution=block, mpirun --map-by slot) or set "
                        "parallel.shard_size", r, node_of_rank[r], r - 1,
                        node_of_rank[r - 1]);
        }
    }
    *per_node = first_count;
    return 0;
}

int st_layout_compute(int world, int rank, const int *node_of_rank, int strategy,
                      int64_t shard_size, st_layout *out, char *err, size_t errn)
{
    memset(out, 0, sizeof *out);
    if (errn)
        err[0] = 0;
    if (world < 1 || rank < 0 || rank >= world)
        return fail(err, errn, "rank %d of a world of %d; hint: this is a bug in the "
                    "runtime layer, report it", rank, world);
    int s;
    char divs[128];
    switch (strategy) {
    case ST_STRAT_FULL_SHARD:
    case ST_STRAT_SHARD_GRAD_OP:
        s = world;
        break;
    case ST_STRAT_NO_SHARD:
        s = 1;
        break;
    case ST_STRAT_HYBRID_SHARD: {
        if (shard_size < 0)
            return fail(err, errn, "parallel.shard_size = %lld is negative; hint: use 0 "
                        "for the ranks of one node", (long long)shard_size);
        if (shard_size > world) {
            divisors(world, divs, sizeof divs);
            return fail(err, errn, "parallel.shard_size = %lld is larger than the %d "
                        "ranks launched; hint: use one of %s, or 0 for the ranks of one "
                        "node", (long long)shard_size, world, divs);
        }
        if (shard_size > 0 && world % shard_size) {
            divisors(world, divs, sizeof divs);
            return fail(err, errn, "parallel.shard_size = %lld does not divide the %d "
                        "ranks launched; hint: use one of %s, or 0 for the ranks of one "
                        "node", (long long)shard_size, world, divs);
        }
        int per_node = 0;
        int rc = node_shape(world, node_of_rank, shard_size, &per_node, err, errn);
        if (rc)
            return rc;
        s = shard_size > 0 ? (int)shard_size : per_node;
        break;
    }
    default:
        return fail(err, errn, "parallel.strategy %d is unknown; hint: use full_shard, "
                    "hybrid_shard, shard_grad_op or no_shard", strategy);
    }
    out->world_size = world;
    out->rank = rank;
    out->shard_size = s;
    out->replicate_size = world / s;
    out->shard_group = rank / s;
    out->shard_rank = rank % s;
    out->replicate_group = rank % s;
    out->replicate_rank = rank / s;
    return 0;
}

/* With a GPU bound, the engine's buffers are device memory: the mpi
 * backend then stages them through the host. */
static st_comm *make_comm(int backend, int device, MPI_Comm c, const char *label,
                          void *compute_stream)
{
    return backend == ST_BACKEND_NCCL ? st_comm_nccl_create(c, label, compute_stream)
                                      : st_comm_mpi_create_staged(c, label, device >= 0,
                                                                  compute_stream);
}

int st_groups_create(st_groups *g, const st_runtime *rt, const st_config *cfg,
                     void *compute_stream)
{
    memset(g, 0, sizeof *g);
    const st_parallel_config *p = &cfg->parallel;

    int *nodes = malloc((size_t)rt->world * sizeof *nodes);
    if (!nodes) {
        st_error(NULL, "out of memory for the node map of %d ranks", rt->world);
        st_runtime_abort(ST_EXIT_FAILURE); /* the others are in the Allgather */
    }
    int node = rt->node;
    st_watchdog_set_timeout(p->timeout_s);
    /* Collectives of set-up go through the watchdog too (watchdog.h). */
    MPI_Request r;
    uint64_t seq = st_watchdog_enter(ST_WD_WORLD);
    st_wd_op op = {"all_gather", "the node map", -1, "world", 0};
    st_watchdog_finish(MPI_Iallgather(&node, 1, MPI_INT, nodes, 1, MPI_INT, MPI_COMM_WORLD, &r),
                       &r, ST_WD_WORLD, seq, &op);
    char err[512];
    int rc = st_layout_compute(rt->world, rt->rank, nodes, p->strategy, p->shard_size,
                               &g->layout, err, sizeof err);
    free(nodes);
    if (rc) {
        /* Same gathered map, same verdict: every rank reports and returns
         * here, none waits in a later collective. */
        st_config_error(cfg, "parallel",
                        p->strategy == ST_STRAT_HYBRID_SHARD && p->shard_size > 0
                            ? "shard_size" : "strategy", "%s", err);
        return rc;
    }

    /* A rank without a GPU makes nccl impossible for all: decide jointly. */
    int local_nccl = rt->device >= 0 && st_comm_nccl_available();
    int all_nccl = local_nccl;
    seq = st_watchdog_enter(ST_WD_WORLD);
    op.op = "all_reduce";
    op.what = "the backend choice";
    st_watchdog_finish(MPI_Iallreduce(&local_nccl, &all_nccl, 1, MPI_INT, MPI_MIN,
                                      MPI_COMM_WORLD, &r), &r, ST_WD_WORLD, seq, &op);
    g->backend = p->backend == ST_BACKEND_AUTO ? (all_nccl ? ST_BACKEND_NCCL : ST_BACKEND_MPI)
                                               : p->backend;
    if (g->backend == ST_BACKEND_NCCL && !all_nccl) {
        return st_config_error(cfg, "parallel", "backend", "parallel.backend = nccl but %s; "
                               "hint: set parallel.backend = mpi or auto",
                               !st_comm_nccl_available() ? "this build has no NCCL"
                               : rt->device < 0 ? "this rank computes on the CPU (no CUDA "
                                                  "device bound)"
                                                : "another rank has no CUDA device");
    }

    MPI_Comm shard = MPI_COMM_NULL, rep = MPI_COMM_NULL;
    const st_layout *l = &g->layout;
    /* The splits block inside MPI: fenced and bounded by the watchdog. */
    st_watchdog_blocking_begin("MPI_Comm_split (the shard and replicate groups)", 1);
    int src = MPI_Comm_split(MPI_COMM_WORLD, l->shard_group, l->shard_rank, &shard);
    int rrc = src != MPI_SUCCESS ? MPI_SUCCESS
                                 : MPI_Comm_split(MPI_COMM_WORLD, l->replicate_group,
                                                  l->replicate_rank, &rep);
    st_watchdog_blocking_end();
    rc = 0;
    if (st_mpi_failed(src, "MPI_Comm_split (shard groups)") ||
        st_mpi_failed(rrc, "MPI_Comm_split (replicate groups)"))
        rc = ST_EXIT_FAILURE;
    /* Same order on every rank: NCCL initialisation blocks per group. */
    if (!rc) {
        g->host_world = st_comm_mpi_create(MPI_COMM_WORLD, "world");
        g->world = make_comm(g->backend, rt->device, MPI_COMM_WORLD, "world", compute_stream);
        g->shard = make_comm(g->backend, rt->device, shard, "shard", compute_stream);
        g->replicate = make_comm(g->backend, rt->device, rep, "replicate", compute_stream);
        if (!g->host_world || !g->world || !g->shard || !g->replicate)
            rc = ST_EXIT_FAILURE; /* the constructor printed why */
    }
    /* The constructors duplicated what they keep. */
    if (shard != MPI_COMM_NULL && st_mpi_failed(MPI_Comm_free(&shard), "MPI_Comm_free"))
        rc = ST_EXIT_FAILURE;
    if (rep != MPI_COMM_NULL && st_mpi_failed(MPI_Comm_free(&rep), "MPI_Comm_free"))
        rc = ST_EXIT_FAILURE;
    return st_runtime_agree(rc);
}

void st_groups_destroy(st_groups *g)
{
    st_comm_destroy(g->replicate);
    st_comm_destroy(g->shard);
    st_comm_destroy(g->world);
    st_comm_destroy(g->host_world);
    g->world = g->shard = g->replicate = g->host_world = NULL;
}

/* pos/size, then the members first, first + stride, ... (count of them). */
static void describe_one(char *buf, size_t n, int pos, int size, int first, int stride)
{
    if (!n)
        return;
    int len = snprintf(buf, n, "%d/%d ", pos, size);
    if (len < 0 || (size_t)len >= n)
        return;
    char *p = buf + len;
    size_t left = n - (size_t)len;
    int last = first + (size - 1) * stride;
    if (size == 1)
        snprintf(p, left, "(rank %d)", first);
    else if (stride == 1)
        snprintf(p, left, "(ranks %d-%d)", first, last);
    else if (size > 8)
        snprintf(p, left, "(ranks %d,%d,%d,...,%d)", first, first + stride,
                 first + 2 * stride, last);
    else {
        int k = snprintf(p, left, "(ranks %d", first);
        for (int i = 1; i < size && k > 0 && (size_t)k < left; i++)
            k += snprintf(p + k, left - (size_t)k, ",%d", first + i * stride);
        if (k > 0 && (size_t)k < left)
            snprintf(p + k, left - (size_t)k, ")");
    }
}

void st_groups_describe(const st_groups *g, char *shard, char *replicate, size_t n)
{
    const st_layout *l = &g->layout;
    describe_one(shard, n, l->shard_rank, l->shard_size, l->shard_group * l->shard_size, 1);
    describe_one(replicate, n, l->replicate_rank, l->replicate_size, l->replicate_group,
                 l->shard_size);
}
