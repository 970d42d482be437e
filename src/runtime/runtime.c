/* MPI start-up and this process's identity (see runtime.h).
 *
 * Identity is taken twice on purpose.  The launcher's view (a PMIx server,
 * else srun's SLURM_* or mpirun's OMPI_* variables) is read before
 * MPI_Init; MPI's own view (MPI_COMM_WORLD plus a shared-memory split) is
 * always computed after it.  The classic failure this catches is an MPI
 * library that cannot talk to the launcher (srun without --mpi=pmix, an
 * mpirun from another MPI): every process then believes it is rank 0 of a
 * world of 1 and the "distributed" job trains N identical copies.
 *
 * PMIx under Open MPI 4.1.4 (Debian, external libpmix 4.2.2): mpirun's
 * orted serves PMIx (PMIX_SERVER_URI2..4, PMIX_NAMESPACE and PMIX_RANK are
 * set) and answers PMIX_JOB_SIZE, PMIX_LOCAL_RANK (uint16), PMIX_NODEID
 * and PMIX_LOCAL_SIZE (uint32; the latter only for the wildcard rank).
 * Calling PMIx_Finalize before MPI_Init breaks MPI_Init in every rank
 * ("orte_init: getting local rank failed"): the library does not recover
 * from a finalize.  Keeping our client open works, since PMIx_Init is
 * reference-counted and MPI's ext3x component shares it; so we release
 * ours only after MPI_Finalize (st_runtime_finalize). */
#include "st_build.h"

#include "runtime/runtime.h"
#include "base/log.h"
#include "base/test_faults.h"
#include "runtime/deadline.h"
#include "runtime/watchdog.h"

#include <mpi.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_PMIX
#include <pmix.h>
#endif

static int runtime_up;
#ifdef HAVE_PMIX
static int pmix_up;
#endif

/* Our PMIx client goes last, after MPI's (see the file comment). */
static void pmix_release(void)
{
#ifdef HAVE_PMIX
    if (pmix_up)
        (void)PMIx_Finalize(NULL, 0); /* nothing left to do if it fails */
    pmix_up = 0;
#endif
}

/* The launcher's claim; -1 in a field = not provided (not checked).  The
 * *_var names are what the messages quote, so a user sees which variable
 * disagrees with MPI. */
typedef struct {
    const char *source; /* NULL: no launcher identity at all */
    long rank, world, local_rank, local_size, node;
    const char *rank_var, *world_var, *local_rank_var, *local_size_var, *node_var;
} launcher_id;

static void launcher_id_clear(launcher_id *id)
{
    memset(id, 0, sizeof *id);
    id->rank = id->world = id->local_rank = id->local_size = id->node = -1;
}

#ifdef HAVE_PMIX
/* PMIx stores each key in its own integer type (uint16 for the local rank,
 * uint32 for sizes and node id, pmix_rank_t for ranks); anything that is
 * not a non-negative integer fitting an int is treated as absent. */
static long pmix_value_to_long(const pmix_value_t *v)
{
    unsigned long long u;
    long long s;
    switch (v->type) {
    case PMIX_UINT8: u = v->data.uint8; goto unsigned_value;
    case PMIX_UINT16: u = v->data.uint16; goto unsigned_value;
    case PMIX_UINT32: u = v->data.uint32; goto unsigned_value;
    case PMIX_UINT64: u = v->data.uint64; goto unsigned_value;
    case PMIX_UINT: u = v->data.uint; goto unsigned_value;
    case PMIX_SIZE: u = v->data.size; goto unsigned_value;
    case PMIX_PROC_RANK: u = v->data.rank; goto unsigned_value;
    case PMIX_INT8: s = v->data.int8; goto signed_value;
    case PMIX_INT16: s = v->data.int16; goto signed_value;
    case PMIX_INT32: s = v->data.int32; goto signed_value;
    case PMIX_INT64: s = v->data.int64; goto signed_value;
    case PMIX_INT: s = v->data.integer; goto signed_value;
    default: return -1;
    }
unsigned_value:
    return u <= INT_MAX ? (long)u : -1;
signed_value:
    return s >= 0 && s <= INT_MAX ? (long)s : -1;
}

static long pmix_get_long(const pmix_proc_t *proc, const char *key)
{
    pmix_value_t *val = NULL;
    if (PMIx_Get(proc, key, NULL, 0, &val) != PMIX_SUCCESS || !val)
        return -1;
    long r = pmix_value_to_long(val);
    PMIX_VALUE_RELEASE(val);
    return r;
}

/* Returns 1 when a PMIx server answered (id filled), 0 to fall back. */
static int pmix_identity(launcher_id *id)
{
    if (!getenv("PMIX_SERVER_URI2") && !getenv("PMIX_SERVER_URI3") &&
        !getenv("PMIX_SERVER_URI4") && !getenv("PMIX_NAMESPACE"))
        return 0;
    pmix_proc_t me;
    PMIX_PROC_CONSTRUCT(&me);
    if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS)
        return 0; /* a stale PMIX_* environment: the variables decide */
    pmix_proc_t job;
    PMIX_PROC_CONSTRUCT(&job);
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);

    id->source = "pmix";
    id->rank = me.rank <= INT_MAX ? (long)me.rank : -1;
    id->world = pmix_get_long(&job, PMIX_JOB_SIZE);
    id->local_rank = pmix_get_long(&me, PMIX_LOCAL_RANK);
    /* Local size is node-level job data: servers answer it for the
     * wildcard rank; some only for the proc itself. */
    id->local_size = pmix_get_long(&job, PMIX_LOCAL_SIZE);
    if (id->local_size < 0)
        id->local_size = pmix_get_long(&me, PMIX_LOCAL_SIZE);
    id->node = pmix_get_long(&me, PMIX_NODEID);
    id->rank_var = "PMIX_RANK";
    id->world_var = "PMIX_JOB_SIZE";
    id->local_rank_var = "PMIX_LOCAL_RANK";
    id->local_size_var = "PMIX_LOCAL_SIZE";
    id->node_var = "PMIX_NODEID";

    /* See the file comment: our client stays open until after MPI_Finalize. */
    pmix_up = 1;
    return id->rank >= 0;
}
#endif

/* Strict non-negative integer from the environment; -1 when unset, -2
 * when set but malformed. */
static long env_long(const char *name)
{
    const char *s = getenv(name);
    if (!s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > INT_MAX)
        return -2;
    return v;
}

/* mpirun's variables win over Slurm's: an mpirun inside an sbatch script
 * inherits the batch step's SLURM_PROCID=0 in every rank. */
static int env_identity(launcher_id *id)
{
    if (getenv("OMPI_COMM_WORLD_RANK")) {
        id->source = "ompi";
        id->rank = env_long(id->rank_var = "OMPI_COMM_WORLD_RANK");
        id->world = env_long(id->world_var = "OMPI_COMM_WORLD_SIZE");
        id->local_rank = env_long(id->local_rank_var = "OMPI_COMM_WORLD_LOCAL_RANK");
        id->local_size = env_long(id->local_size_var = "OMPI_COMM_WORLD_LOCAL_SIZE");
        id->node_var = "node";  /* mpirun exports no node index */
        return 1;
    }
    if (getenv("SLURM_PROCID")) {
        id->source = "slurm";
        id->rank = env_long(id->rank_var = "SLURM_PROCID");
        id->world = env_long(id->world_var = "SLURM_NTASKS");
        id->local_rank = env_long(id->local_rank_var = "SLURM_LOCALID");
        id->local_size = -1;  /* SLURM_TASKS_PER_NODE is a compressed list: not worth parsing */
        id->local_size_var = "local size";
        id->node = env_long(id->node_var = "SLURM_NODEID");
        return 1;
    }
    return 0;
}

/* Names the first malformed variable, or NULL. */
static const char *env_malformed(const launcher_id *id)
{
    if (id->rank == -2) return id->rank_var;
    if (id->world == -2) return id->world_var;
    if (id->local_rank == -2) return id->local_rank_var;
    if (id->local_size == -2) return id->local_size_var;
    if (id->node == -2) return id->node_var;
    return NULL;
}

#define MISMATCH_HINT "hint: launch with srun --mpi=pmix or mpirun, not a mix"

/* Compares the launcher's claims with MPI's for this rank alone; prints
 * one error line and returns 1 on the first disagreement. */
static int check_local(const launcher_id *id, const st_runtime *rt)
{
    const char *bad = env_malformed(id);
    if (bad) {
        st_error(NULL, "%s='%s' is not a non-negative integer; hint: unset it or "
                 "launch with srun or mpirun", bad, getenv(bad) ? getenv(bad) : "");
        return 1;
    }
    if (id->rank >= 0 && id->rank != rt->rank) {
        st_error(NULL, "rank identity mismatch: %s=%ld but MPI rank %d; " MISMATCH_HINT,
                 id->rank_var, id->rank, rt->rank);
        return 1;
    }
    if (id->world >= 0 && id->world != rt->world) {
        st_error(NULL, "rank identity mismatch: %s=%ld but MPI world size %d; " MISMATCH_HINT,
                 id->world_var, id->world, rt->world);
        return 1;
    }
    if (id->local_rank >= 0 && id->local_rank != rt->local_rank) {
        st_error(NULL, "rank identity mismatch: %s=%ld but MPI local rank %d (rank %d); "
                 MISMATCH_HINT, id->local_rank_var, id->local_rank, rt->local_rank, rt->rank);
        return 1;
    }
    if (id->local_size >= 0 && id->local_size != rt->local_size) {
        st_error(NULL, "rank identity mismatch: %s=%ld but MPI finds %d ranks on "
                 "this node (rank %d); " MISMATCH_HINT,
                 id->local_size_var, id->local_size, rt->local_size, rt->rank);
        return 1;
    }
    return 0;
}

int st_mpi_failed(int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return 0;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    if (MPI_Error_string(rc, msg, &n) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    st_error(NULL, "%s failed: %s; hint: check the MPI installation and launcher", what, msg);
    return 1;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* MPI's view of the node structure, and the cross-check of everything the
 * launcher claimed.  Ends in one world Allgather of (node leader, launcher
 * node, local verdict), so every rank sees every verdict and all return
 * the same status: a rank that disagrees alone must not leave the others
 * waiting in the next collective. */
static int mpi_identity(st_runtime *rt, const launcher_id *id)
{
    int rc;
    MPI_Comm shm;
    st_watchdog_blocking_begin("MPI_Comm_split_type (the node groups)", 1);
    rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rt->rank, MPI_INFO_NULL,
                             &shm);
    st_watchdog_blocking_end();
    if (st_mpi_failed(rc, "MPI_Comm_split_type"))
        return ST_EXIT_FAILURE;
    int leader = rt->rank;
    rc = ST_EXIT_FAILURE;
    if (!st_mpi_failed(MPI_Comm_rank(shm, &rt->local_rank), "MPI_Comm_rank") &&
        !st_mpi_failed(MPI_Comm_size(shm, &rt->local_size), "MPI_Comm_size")) {
        /* Watched like every collective, so a rank that never starts
         * leaves an error, not a hang. */
        int id = st_watchdog_register(shm);
        uint64_t seq = st_watchdog_enter(id);
        MPI_Request r;
        st_wd_op op = {"all_reduce", "the node leaders", -1, "node", 0};
        st_watchdog_finish(MPI_Iallreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, shm, &r),
                           &r, id, seq, &op);
        st_watchdog_unregister(id);
        rc = 0;
    }
    if (st_mpi_failed(MPI_Comm_free(&shm), "MPI_Comm_free") || rc)
        return ST_EXIT_FAILURE;

    const int w = rt->world;
    int mine[3] = {leader, id->node >= 0 ? (int)id->node : -1, check_local(id, rt)};
    int *all = malloc((size_t)w * 3 * sizeof *all);
    int *node_of = calloc((size_t)w, sizeof *node_of);
    long *claimed = malloc((size_t)w * sizeof *claimed);
    if (!all || !node_of || !claimed) {
        st_error(NULL, "out of memory for the identity of %d ranks", w);
        st_runtime_abort(ST_EXIT_FAILURE); /* the others are in the Allgather */
    }
    {
        uint64_t seq = st_watchdog_enter(ST_WD_WORLD);
        MPI_Request r;
        st_wd_op op = {"all_gather", "the rank identities", -1, "world", 0};
        st_watchdog_finish(MPI_Iallgather(mine, 3, MPI_INT, all, 3, MPI_INT, MPI_COMM_WORLD,
                                          &r), &r, ST_WD_WORLD, seq, &op);
    }
    /* A rank's leader is its node's lowest rank, so leaders come before
     * their members and one pass numbers nodes by lowest world rank. */
    int n_nodes = 0, any_bad = 0, have_nodes = 1;
    for (int r = 0; r < w; r++) {
        int l = all[3 * r];
        node_of[r] = l < 0 || l >= r ? n_nodes++ : node_of[l];
        any_bad |= all[3 * r + 2];
        have_nodes &= all[3 * r + 1] >= 0;
    }
    rt->node = node_of[rt->rank];
    rt->n_nodes = n_nodes;

    /* The launcher's node ids may be numbered any way (mpirun's host may
     * carry no ranks); what must match is the partition: same launcher
     * node <=> same shared-memory node.  Computed from gathered data, so
     * every rank reaches the same verdict and reports it. */
    if (have_nodes && !any_bad) {
        int split = -1;
        for (int r = 0; r < w && split < 0; r++)
            if (all[3 * r + 1] != all[3 * all[3 * r] + 1])
                split = r;
        int n = 0;
        for (int r = 0; r < w; r++)
            if (all[3 * r] == r)
                claimed[n++] = all[3 * r + 1];
        qsort(claimed, (size_t)n, sizeof *claimed, cmp_long);
        int merged = 0;
        for (int i = 1; i < n; i++)
            merged |= claimed[i] == claimed[i - 1];
        if (split >= 0) {
            st_error(NULL, "rank identity mismatch: %s says ranks %d and %d are on "
                     "different nodes but MPI finds them sharing memory; " MISMATCH_HINT,
                     id->node_var, all[3 * split], split);
            any_bad = 1;
        } else if (merged) {
            st_error(NULL, "rank identity mismatch: %s puts ranks of different "
                     "MPI shared-memory nodes on one node; " MISMATCH_HINT, id->node_var);
            any_bad = 1;
        }
    }
    free(all), free(node_of), free(claimed);
    return any_bad ? ST_EXIT_USAGE : 0;
}

int st_runtime_init(st_runtime *rt, int *argc, char ***argv)
{
    memset(rt, 0, sizeof *rt);
    rt->device = -1;
    rt->identity_source = "mpi";

    /* Nothing can be watched until the watchdog is up (the launcher
     * hand-shake, MPI_Init, the watchdog's own set-up): a rank that dies
     * or stops then leaves the others blocked inside MPI, so a timer ends
     * them.  The watchdog takes the same bound until the configuration
     * sets parallel.timeout_s. */
    const double startup_s = st_deadline_startup_s();
    if (startup_s < 0)
        return ST_EXIT_USAGE;
    char where[48] = "start-up";
    const char *r_env = getenv("OMPI_COMM_WORLD_RANK");
    r_env = r_env ? r_env : getenv("SLURM_PROCID");
    if (r_env && strlen(r_env) < 12)
        snprintf(where, sizeof where, "rank %s", r_env);
    st_deadline_arm(startup_s, where, "MPI start-up (the launcher hand-shake and "
                    "MPI_Init)", "a rank died or stalled while starting (see the launcher's "
                    "output), or the launcher is unreachable; if start-up is only slow, raise "
                    "SHARDTRAIN_STARTUP_TIMEOUT_S", NULL);
    st_watchdog_set_timeout(startup_s);

    launcher_id id;
    launcher_id_clear(&id);
    int have = 0;
#ifdef HAVE_PMIX
    have = pmix_identity(&id);
    if (!have)
        launcher_id_clear(&id);
#endif
    if (!have)
        have = env_identity(&id);

    st_fault_at("init", have ? id.rank : -1);
    int provided = 0, rc;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        st_error(NULL, "MPI_Init_thread failed; hint: check the MPI installation");
        return ST_EXIT_FAILURE;
    }
    runtime_up = 1;
    if (st_mpi_failed(MPI_Comm_rank(MPI_COMM_WORLD, &rt->rank), "MPI_Comm_rank") ||
        st_mpi_failed(MPI_Comm_size(MPI_COMM_WORLD, &rt->world), "MPI_Comm_size"))
        return ST_EXIT_FAILURE;
    if (gethostname(rt->host, sizeof rt->host - 1) != 0)
        strcpy(rt->host, "?");
    st_log_set_rank(rt->rank);
    if (rt->world > 1)
        st_log_hold(); /* until the agreements say which rank prints */
    if ((rc = st_watchdog_init()))
        return rc;
    st_deadline_disarm();
    st_fault_at("startup", rt->rank);
    if (provided < MPI_THREAD_FUNNELED) {
        /* Same library on every rank: every rank returns here. */
        st_error(NULL, "MPI provides thread level %d, shardtrain needs "
                 "MPI_THREAD_FUNNELED", provided);
        return ST_EXIT_FAILURE;
    }
    if (have)
        rt->identity_source = id.source;
    return mpi_identity(rt, &id);
}

/* The worst status, and who prints: of the ranks that hold error lines
 * (and, unless final, failed), the lowest prints them and every other
 * rank drops its own, so a bad input seen by every rank is one line, and
 * one seen by some ranks (a file missing on one node) is still printed.
 * One reduction of {status, -rank}: the maximum of -rank is the lowest
 * rank. */
static int agree(int rc, int final, const st_wd_op *op)
{
    const int speaks = st_log_held() && (rc != 0 || final);
    int mine[2] = {rc, speaks ? -st_log_rank() : INT_MIN}, all[2] = {rc, INT_MIN};
    uint64_t seq = st_watchdog_enter(ST_WD_WORLD);
    MPI_Request r;
    st_watchdog_finish(MPI_Iallreduce(mine, all, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r),
                       &r, ST_WD_WORLD, seq, op);
    if (speaks)
        st_log_release(all[1] == -st_log_rank());
    return all[0];
}

void st_runtime_finalize(void)
{
    if (runtime_up) {
        /* MPI_Finalize waits for every rank: a watched barrier first, so a
         * rank that died or stalled is reported instead of hanging the
         * rest at the very end. */
        if (st_watchdog_running()) {
            /* The barrier is also the last agreement on who prints the
             * error lines still held: a failure that returned without an
             * agreement (every rank refusing the same input) is one line. */
            st_wd_op op = {"barrier", NULL, -1, "world", -1};
            (void)agree(0, 1, &op);
        }
        st_log_unhold();
        st_watchdog_finalize();
        MPI_Finalize();
    }
    runtime_up = 0;
    pmix_release();
}

void st_runtime_abort(int status)
{
    st_log_unhold(); /* ranks abort on their own: each says why */
    if (runtime_up) {
        int size = 1;
        if (MPI_Comm_size(MPI_COMM_WORLD, &size) == MPI_SUCCESS && size > 1)
            MPI_Abort(MPI_COMM_WORLD, status);
        MPI_Finalize();
    }
    exit(status);
}

void st_runtime_log_identity(const st_runtime *rt, const char *shard_desc,
                             const char *replicate_desc)
{
    char dev[32];
    if (rt->device < 0)
        strcpy(dev, "cpu");
    else
        snprintf(dev, sizeof dev, "cuda:%d", rt->device);
    /* One fprintf of the whole line: ranks share mpirun's stderr and a line
     * written in pieces interleaves with its neighbours'. */
    fprintf(stderr, "shardtrain: rank %d/%d host %s local %d/%d node %d device %s "
            "identity %s shard %s replicate %s\n",
            rt->rank, rt->world, rt->host, rt->local_rank, rt->local_size, rt->node, dev,
            rt->identity_source ? rt->identity_source : "mpi",
            shard_desc ? shard_desc : "-", replicate_desc ? replicate_desc : "-");
    fflush(stderr);
}

void st_runtime_set_step(int64_t step)
{
    st_watchdog_set_step(step);
}

int st_runtime_agree(int rc)
{
    st_wd_op op = {"all_reduce", "the status agreement", -1, "world", st_watchdog_step()};
    return agree(rc, 0, &op);
}

int st_runtime_gather_u64(const unsigned long long *send, unsigned long long *recv, int count)
{
    /* Watched like every collective: a rank that dies or stops while a
     * checkpoint is written must not hang rank 0 here. */
    st_wd_op op = {"gather", "the checkpoint block hashes", -1, "world", st_watchdog_step()};
    uint64_t seq = st_watchdog_enter(ST_WD_WORLD);
    MPI_Request r;
    st_watchdog_finish(MPI_Igather(send, count, MPI_UNSIGNED_LONG_LONG, recv, count,
                                   MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD, &r),
                       &r, ST_WD_WORLD, seq, &op);
    return 0;
}
