/* Step-time projection: how long one optimizer step of a model and
 * configuration would take on a cluster that we cannot (or not yet) run
 * on, and how much of the communication the engine's schedule hides behind
 * compute.  It walks the engine's own gather / compute / reduce schedule
 * (engine/schedule.h) on a simulated timeline with analytic compute and ring
 * collective costs; the model and its assumptions are written out at the
 * top of projection.c.  Pure arithmetic: no MPI, no device. */
#ifndef ST_PROJECTION_H
#define ST_PROJECTION_H

#include <stddef.h>

#include "config/config.h"
#include "engine/schedule.h"
#include "model/model.h"

typedef struct {
    int nodes, gpus_per_node;           /* N x G ranks */
    double tflops;                      /* achieved dense compute per GPU, TFLOP/s */
    /* Per-GPU bus bandwidth (GB/s) and latency per ring step (us), inside
     * a node and across nodes; INFINITY bandwidth for an ideal network. */
    double intra_bw_gbs, intra_lat_us;
    double inter_bw_gbs, inter_lat_us;
    double hbm_bw_gbs;                  /* memory bandwidth for the (memory-bound) optimizer update;
                                           INFINITY neglects the update */
    double comm_sm_share;               /* the fraction of a GPU a running collective's kernels
                                           hold (0 <= f < 1): compute beside one runs at 1 - f
                                           of its speed; 0 when tflops was achieved with
                                           communication beside it */
} st_cluster;

/* H100 SXM nodes of 8 GPUs with NVLink 4 and one 400 Gb/s InfiniBand NIC
 * per GPU; the values and their sources are in projection.c.  tflops is 0:
 * achieved compute depends on the kernels, so the caller must give it. */
void st_cluster_defaults(st_cluster *c);

typedef struct {
    double step_s;              /* one optimizer step */
    double compute_s;           /* pure compute part of a step (optimizer update included) */
    double exposed_comm_s;      /* communication not hidden by compute, and the compute
                                   it slows (comm_sm_share): step_s - compute_s */
    double optimizer_s;         /* the optimizer update's part of compute_s */
    double tokens_per_s_per_gpu;
    double scaling_efficiency;  /* compute_s / step_s: 1 = communication fully hidden */
    double ag_bytes, rs_bytes, ar_bytes;  /* per rank per step: bytes each rank sends on the
                                             ring ((n-1)/n of the buffer, twice for all-reduce) */
    int shard_size, replicate_size;       /* S and R used */
    int accum;                            /* micro-steps per optimizer step */
} st_projection;

/* Strategy, prefetch, dtypes, no_sync, batch and checkpointing from cfg;
 * the shard group size S from the strategy and cfg->parallel.shard_size (0
 * = gpus_per_node for hybrid_shard), with the engine's own layout rules.
 * m must have been built from cfg->model.  Returns 0, or ST_EXIT_USAGE with
 * a one-line message in err (bad layout, tflops <= 0, bandwidth <= 0,
 * negative latency, global_batch not divisible by micro_batch x ranks). */
int st_project_step(const st_model *m, const st_config *cfg, const st_cluster *c,
                    st_projection *out, char *err, size_t errn);
/* The same, with each schedule event the projection walks appended to
 * trace (tests compare it with the events the engine executes). */
int st_project_step_traced(const st_model *m, const st_config *cfg, const st_cluster *c,
                           st_projection *out, char *err, size_t errn, st_sched_trace *trace);

#endif
