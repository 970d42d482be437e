/* `shardtrain bench-comm`: bandwidth of the collectives the FSDP engine
 * runs (all_gather, reduce_scatter, all_reduce on float32), over the same
 * process groups and backend a training run with the same configuration
 * would use, reported like nccl-tests (out-of-place and in-place columns of
 * time, algbw, busbw, #wrong, and the closing average bus bandwidth).
 *
 * Training throughput on many
 * ranks is bounded by the gathers and reductions of the FSDP engine, so
 * this measures exactly those calls - through comm.h, on the groups and
 * backend that st_groups_create builds from the same configuration - rather
 * than raw MPI or NCCL, and reports them in nccl-tests' terms so numbers
 * can be set beside an nccl-tests run on the same machine.  Every size is
 * also checked against the exact result, because a fast wrong collective
 * is worse than a slow one. */
#include "cli/commands.h"
#include "cli/args.h"
#include "base/alloc.h"
#include "comm/comm.h"
#include "config/config.h"
#include "runtime/device.h"
#include "comm/groups.h"
#include "kernels/kernels_select.h"
#include "base/log.h"
#include "runtime/runtime.h"

#include <inttypes.h>
#include <stddef.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 4 GiB: 2^30 floats keeps every per-call count within MPI's int counts. */
#define MAX_BYTES_LIMIT (INT64_C(1) << 32)

typedef struct {
    int64_t min_bytes, max_bytes, iters, warmup;
    const char *group;
} bench_args;

enum { COLL_ALL_GATHER, COLL_REDUCE_SCATTER, COLL_ALL_REDUCE, N_COLL };
static const char *const coll_name[N_COLL] = {"all_gather", "reduce_scatter", "all_reduce"};

static const char *const group_names[] = {"world", "shard", "replicate", NULL};

/* The counts are checked as they are read, --group only once all are. */
static const st_arg_option bench_options[] = {
    {.name = "--min-bytes", .kind = ST_ARG_INT, .offset = offsetof(bench_args, min_bytes),
     .min = 1, .max = MAX_BYTES_LIMIT,
     .bad = "--min-bytes '%s' is not a byte count in [1, 4294967296]"},
    {.name = "--max-bytes", .kind = ST_ARG_INT, .offset = offsetof(bench_args, max_bytes),
     .min = 1, .max = MAX_BYTES_LIMIT,
     .bad = "--max-bytes '%s' is not a byte count in [1, 4294967296]"},
    {.name = "--iters", .kind = ST_ARG_INT, .offset = offsetof(bench_args, iters),
     .min = 1, .max = 1000000000, .bad = "--iters '%s' is not an integer in [1, 1000000000]"},
    {.name = "--warmup", .kind = ST_ARG_INT, .offset = offsetof(bench_args, warmup),
     .min = 0, .max = 1000000000, .bad = "--warmup '%s' is not an integer in [0, 1000000000]"},
    {.name = "--group", .kind = ST_ARG_STRING, .offset = offsetof(bench_args, group),
     .check = ST_ARG_CHECK_AT_END, .choices = group_names,
     .bad = "--group '%s' is not world, shard or replicate"},
};

/* CONFIG is counted after the sizes are compared (st_args_missing below),
 * the order bench-comm has always reported its errors in. */
static const st_args_spec bench_spec = {
    .overrides = 1,
    ST_ARGS_OPTIONS(bench_options),
    .positionals = {"CONFIG"},
    .n_positionals = 1,
};

/* Everything is validated here, before MPI starts, so a typo costs one
 * error line instead of one per rank after a launcher round trip. */
static int parse_bench_args(int argc, char **argv, bench_args *b, st_args *a)
{
    *b = (bench_args){.min_bytes = 1024, .max_bytes = INT64_C(16) << 20, .iters = 20,
                      .warmup = 5, .group = "world"};
    int rc = st_args_parse(&bench_spec, argc, argv, b, a);
    if (rc)
        return rc;
    if (b->min_bytes > b->max_bytes) {
        int min_at = st_args_value_at(&bench_spec, a, "--min-bytes");
        return st_arg_error(min_at ? min_at : st_args_value_at(&bench_spec, a, "--max-bytes"),
                            "--min-bytes %" PRId64 " > --max-bytes %" PRId64, b->min_bytes,
                            b->max_bytes);
    }
    return st_args_missing(&bench_spec, a, 1, argc); /* one past the last */
}

/* Where the collectives read and write.  The mpi backend works on host
 * memory, so the host arrays are the buffers; nccl needs device memory,
 * which comes from the kernels instance whose stream the nccl
 * communicators follow, and the host arrays stage inputs and receive
 * results for the check. */
typedef struct {
    st_kernels *k;           /* the device buffers' backend; NULL: host buffers */
    float *host_send, *host_recv;
    void *send, *recv;
    size_t bytes;
} bench_bufs;

static void bufs_create(bench_bufs *b, st_kernels *device, size_t bytes)
{
    memset(b, 0, sizeof *b);
    b->bytes = bytes;
    b->k = device;
    b->host_send = st_alloc(bytes, ST_MEM_COMM);
    b->host_recv = st_alloc(bytes, ST_MEM_COMM);
    b->send = b->host_send;
    b->recv = b->host_recv;
    if (device) {
        b->send = device->ops->alloc(device, bytes, ST_MEM_COMM);
        b->recv = device->ops->alloc(device, bytes, ST_MEM_COMM);
    }
}

static void bufs_destroy(bench_bufs *b)
{
    if (b->k) {
        b->k->ops->free(b->k, b->send);
        b->k->ops->free(b->k, b->recv);
    }
    st_free(b->host_send);
    st_free(b->host_recv);
    memset(b, 0, sizeof *b);
}

/* Host arrays -> collective buffers (first `send_bytes` / `recv_bytes`). */
static void bufs_upload(bench_bufs *b, size_t send_bytes, size_t recv_bytes)
{
    if (!b->k)
        return;
    b->k->ops->from_host(b->k, b->send, b->host_send, send_bytes);
    b->k->ops->from_host(b->k, b->recv, b->host_recv, recv_bytes);
}

/* On the compute stream, which the waits made follow the collectives. */
static void bufs_download_recv(bench_bufs *b, size_t bytes)
{
    if (b->k)
        b->k->ops->to_host(b->k, b->host_recv, b->recv, bytes);
}

/* st_comm_wait on nccl only orders the compute stream; the host must see
 * the work finished before it reads the clock. */
static void bufs_sync(const bench_bufs *b)
{
    if (b->k)
        b->k->ops->sync(b->k);
}

/* Small integers, so every partial sum in any order is exact in float32 and
 * the check can demand equality; the rank term tells the ranks' blocks
 * apart, the index term catches misplaced elements. */
static float pattern(int rank, int64_t i)
{
    return (float)(rank + 1 + (int)(i % 7));
}

/* Per-rank and total element counts of one collective at nominal size S:
 * gathers and scatters hand each rank whole floats, so S is rounded down to
 * a multiple of 4 * n bytes (at least one float per rank). */
static void coll_counts(int coll, int64_t S, int n, int64_t *per_rank, int64_t *total)
{
    if (coll == COLL_ALL_REDUCE) {
        *per_rank = *total = S / 4 > 0 ? S / 4 : 1;
        return;
    }
    *per_rank = S / (4 * (int64_t)n) > 0 ? S / (4 * (int64_t)n) : 1;
    *total = *per_rank * n;
}

static int start_coll(int coll, st_comm *c, bench_bufs *b, int64_t per_rank,
                      st_comm_req *req)
{
    switch (coll) {
    case COLL_ALL_GATHER:
        return st_comm_allgather(c, b->send, b->recv, per_rank, ST_DT_F32, req,
                                 st_desc("bench-comm all_gather", -1));
    case COLL_REDUCE_SCATTER:
        return st_comm_reduce_scatter(c, b->send, b->recv, per_rank, ST_DT_F32, req,
                                      st_desc("bench-comm reduce_scatter", -1));
    default:
        return st_comm_allreduce(c, b->recv, per_rank, ST_DT_F32, req,
                                 st_desc("bench-comm all_reduce", -1));
    }
}

/* A failed collective on one rank leaves the others blocked inside theirs;
 * only an abort gets every rank out. */
static void run_coll(int coll, st_comm *c, bench_bufs *b, int64_t per_rank)
{
    st_comm_req req = {0};
    if (start_coll(coll, c, b, per_rank, &req) || st_comm_wait(&req))
        st_runtime_abort(ST_EXIT_FAILURE);
}

/* Fill inputs for this collective; poison the output (NaN) so a collective
 * that writes nothing cannot pass the check with stale results. */
static void fill_inputs(int coll, const st_comm *c, bench_bufs *b, int64_t per_rank,
                        int64_t total, size_t *send_bytes, size_t *recv_bytes)
{
    int64_t n_send = coll == COLL_ALL_GATHER ? per_rank : coll == COLL_REDUCE_SCATTER ? total : 0;
    int64_t n_recv = coll == COLL_REDUCE_SCATTER ? per_rank : total;
    for (int64_t i = 0; i < n_send; i++)
        b->host_send[i] = pattern(c->rank, i);
    if (coll == COLL_ALL_REDUCE)
        for (int64_t i = 0; i < n_recv; i++)
            b->host_recv[i] = pattern(c->rank, i);
    else
        memset(b->host_recv, 0xff, (size_t)n_recv * sizeof(float));
    *send_bytes = (size_t)n_send * sizeof(float);
    *recv_bytes = (size_t)n_recv * sizeof(float);
}

static int64_t count_wrong(int coll, const st_comm *c, const bench_bufs *b,
                           int64_t per_rank, int64_t total)
{
    const int64_t n = c->size;
    const float rank_sum = (float)(n * (n + 1) / 2);
    int64_t wrong = 0;
    const float *out = b->host_recv;
    if (coll == COLL_ALL_GATHER) {
        for (int64_t i = 0; i < total; i++)
            wrong += !(out[i] == pattern((int)(i / per_rank), i % per_rank));
    } else if (coll == COLL_REDUCE_SCATTER) {
        for (int64_t i = 0; i < per_rank; i++)
            wrong += !(out[i] == rank_sum + (float)(n * ((c->rank * per_rank + i) % 7)));
    } else {
        for (int64_t i = 0; i < total; i++)
            wrong += !(out[i] == rank_sum + (float)(n * (i % 7)));
    }
    return wrong;
}

static int barrier(void)
{
    return st_mpi_failed(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

/* One row: warm up, time `iters` back-to-back start+wait pairs, then one
 * checked run with fresh inputs.  The check runs apart from the timed loop
 * because all_reduce works in place: after the timed iterations its buffer
 * holds n^k-fold sums, not something to compare exactly. */
static int bench_one(int coll, st_comm *c, bench_bufs *b, int64_t S, const bench_args *a,
                     int64_t *wrong_total, double *busbw)
{
    int64_t per_rank, total;
    coll_counts(coll, S, c->size, &per_rank, &total);
    size_t sb, rb;

    fill_inputs(coll, c, b, per_rank, total, &sb, &rb);
    if (coll == COLL_ALL_REDUCE) /* zeros stay zeros however often summed */
        memset(b->host_recv, 0, rb);
    bufs_upload(b, sb, rb);
    for (int64_t k = 0; k < a->warmup; k++)
        run_coll(coll, c, b, per_rank);
    bufs_sync(b);
    if (barrier())
        return ST_EXIT_FAILURE;
    double t0 = MPI_Wtime();
    for (int64_t k = 0; k < a->iters; k++)
        run_coll(coll, c, b, per_rank);
    bufs_sync(b);
    double local = (MPI_Wtime() - t0) / (double)a->iters, slowest = local;

    fill_inputs(coll, c, b, per_rank, total, &sb, &rb);
    bufs_upload(b, sb, rb);
    run_coll(coll, c, b, per_rank);
    bufs_download_recv(b, rb);
    int64_t wrong = count_wrong(coll, c, b, per_rank, total);

    /* The slowest rank sets the pace of a step, and every rank's errors count. */
    if (st_mpi_failed(MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                      "MPI_Allreduce") ||
        st_mpi_failed(MPI_Allreduce(&wrong, wrong_total, 1, MPI_INT64_T, MPI_SUM,
                                    MPI_COMM_WORLD), "MPI_Allreduce"))
        return ST_EXIT_FAILURE;

    int64_t bytes = total * (int64_t)sizeof(float);
    int n = c->size;
    double algbw = slowest > 0 ? (double)bytes / slowest / 1e9 : 0.0;
    double factor = coll == COLL_ALL_REDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
    *busbw = algbw * factor;
    /* nccl-tests times each size twice, out of place and in place; the
     * engine runs all_gather and reduce_scatter only out of place and
     * all_reduce only in place (comm.h), so that one column is measured
     * and the other says N/A rather than time a call training never makes. */
    char cols[64];
    snprintf(cols, sizeof cols, "%10.2f %11.2f %11.2f %8" PRId64, slowest * 1e6, algbw, *busbw,
             *wrong_total);
    const char *na = "       N/A         N/A         N/A      N/A";
    int in_place = coll == COLL_ALL_REDUCE;
    st_info("  %-14s %12" PRId64 " %12" PRId64 "  %s  %s", coll_name[coll], bytes, total,
            in_place ? na : cols, in_place ? cols : na);
    return 0;
}

static st_comm *pick_group(const st_groups *g, const char *name)
{
    return !strcmp(name, "shard") ? g->shard : !strcmp(name, "replicate") ? g->replicate
                                                                          : g->world;
}

/* k: the kernels instance of this rank's memory (cuda with a GPU bound). */
static int bench_all(const st_groups *g, const st_runtime *rt, const bench_args *a,
                     st_kernels *k, int64_t *wrong_sum)
{
    st_comm *c = pick_group(g, a->group);
    int n = c->size;
    /* Rounding only ever shrinks a size, except the one-float-per-rank floor. */
    size_t need = (size_t)(a->max_bytes > 4 * (int64_t)n ? a->max_bytes : 4 * (int64_t)n);
    need = (need + 63) / 64 * 64;
    bench_bufs b;
    bufs_create(&b, g->backend == ST_BACKEND_NCCL ? k : NULL, need);
    int rc = 0;

    if (rc == 0) {
        st_info("# shardtrain bench-comm: backend %s, group %s, ranks %d "
                "(%d such group%s running at once, world %d)",
                st_enum_name("parallel", "backend", g->backend), a->group, n,
                rt->world / n, rt->world / n == 1 ? "" : "s", rt->world);
        st_info("# float32; sizes %" PRId64 "..%" PRId64 " bytes, doubling; "
                "%" PRId64 " timed iterations after %" PRId64 " warmup",
                a->min_bytes, a->max_bytes, a->iters, a->warmup);
        st_info("# bytes: all_gather = gathered output, reduce_scatter = input, "
                "all_reduce = buffer; rounded down to whole floats per rank "
                "(multiple of 4*n bytes for all_gather and reduce_scatter, "
                "4 for all_reduce), each size once");
        st_info("# time_us = max over ranks of elapsed/iters; algbw = bytes/time "
                "(GB/s = 1e9 bytes/s)");
        st_info("# busbw = algbw * 2(n-1)/n for all_reduce, algbw * (n-1)/n for "
                "all_gather and reduce_scatter (n = %d)", n);
        st_info("# wrong = output elements differing from the exact result, "
                "summed over ranks");
        st_info("# %-14s %12s %12s  %27s %41s", "", "", "", "out-of-place", "in-place");
        st_info("# %-14s %12s %12s  %10s %11s %11s %8s  %10s %11s %11s %8s", "collective",
                "bytes", "count", "time_us", "algbw_GB/s", "busbw_GB/s", "wrong", "time_us",
                "algbw_GB/s", "busbw_GB/s", "wrong");
    }
    double bus_sum[N_COLL] = {0}; /* for nccl-tests' closing average */
    int rows[N_COLL] = {0};
    /* Below one float per rank every size rounds up to that floor: the
     * same call, measured and printed once, and counted once in the
     * average. */
    int64_t last_total[N_COLL] = {0};
    for (int64_t S = a->min_bytes; rc == 0 && S <= a->max_bytes; S *= 2)
        for (int coll = 0; rc == 0 && coll < N_COLL; coll++) {
            int64_t wrong = 0, per_rank, total;
            double busbw = 0.0;
            coll_counts(coll, S, n, &per_rank, &total);
            if (total == last_total[coll])
                continue;
            last_total[coll] = total;
            rows[coll]++;
            /* Failing alone here would leave the other ranks in the next
             * collective: abort them all. */
            if (bench_one(coll, c, &b, S, a, &wrong, &busbw))
                st_runtime_abort(ST_EXIT_FAILURE);
            *wrong_sum += wrong;
            bus_sum[coll] += busbw;
        }
    /* nccl-tests closes with "# Avg bus bandwidth : X", X = (sum of busbw
     * over every timed row and column) / (their number): the mean over the
     * sizes of both the out-of-place and in-place runs of its one
     * collective.  Here each collective has one measured column per size,
     * so X = sum over sizes of busbw / number of sizes, one line per
     * collective; scripts that read the first such line get all_gather's. */
    st_info("# Wrong values         : %" PRId64 " %s", *wrong_sum, *wrong_sum ? "FAILED" : "OK");
    for (int coll = 0; coll < N_COLL; coll++)
        if (rows[coll] > 0)
            st_info("# Avg bus bandwidth    : %.6g %s", bus_sum[coll] / rows[coll],
                    coll_name[coll]);
    bufs_destroy(&b);
    return st_runtime_agree(rc);
}

int st_cmd_bench_comm(int argc, char **argv)
{
    bench_args b;
    st_args a;
    int rc = parse_bench_args(argc, argv, &b, &a);
    if (rc)
        return rc;

    st_runtime rt;
    st_config cfg;
    st_groups g;
    st_kernels *k = NULL;
    int loaded = 0;
    int64_t wrong = 0;
    memset(&g, 0, sizeof g);
    rc = st_runtime_init(&rt, NULL, NULL);
    if (rc == 0) {
        rc = st_runtime_agree(st_config_load(&cfg, a.positional[0], a.overrides, a.n_overrides));
        loaded = 1;
    }
    /* The device decides the backend (auto), and ranks may disagree about
     * it; sharing a GPU is allowed, as a measurement of that setup. */
    if (rc == 0)
        rc = st_runtime_agree(st_device_bind(&rt, &cfg, 1));
    /* Device buffers come from a kernels instance on the bound GPU, and the
     * nccl communicators follow its stream. */
    if (rc == 0)
        rc = st_runtime_agree(st_kernels_for_memory(rt.device >= 0, &k));
    if (rc == 0)
        rc = st_groups_create(&g, &rt, &cfg, k->stream);
    if (rc == 0)
        rc = bench_all(&g, &rt, &b, k, &wrong);
    if (rc == 0 && wrong > 0) {
        if (rt.rank == 0)
            st_error(NULL, "%" PRId64 " output elements of the collectives differ from the "
                     "exact result; hint: the %s backend or the interconnect is "
                     "misbehaving, rerun with fewer ranks to isolate it", wrong,
                     st_enum_name("parallel", "backend", g.backend));
        rc = ST_EXIT_FAILURE;
    }
    st_groups_destroy(&g);
    st_kernels_close(k);
    if (loaded)
        st_config_free(&cfg);
    st_runtime_finalize();
    return rc;
}
