/* `shardtrain bench-comm`: bandwidth of the collectives the FSDP engine
 * runs (all_gather, reduce_scatter, all_reduce on float32), over the same
 * process groups and backend a training run with the same configuration
 * would use, reported like nccl-tests (time, algbw, busbw, #wrong). */
#ifndef ST_BENCH_COMM_H
#define ST_BENCH_COMM_H

/* argv[0] is "bench-comm"; the rest are its arguments:
 *   [-s SECTION.KEY=VALUE]... [--min-bytes B] [--max-bytes B] [--iters N]
 *   [--warmup N] [--group world|shard|replicate] CONFIG
 * Parses the arguments before starting MPI, then initialises and finalises
 * the runtime itself.  Returns 0, 1 when any result was wrong (or a
 * runtime failure), 2 for bad arguments or configuration; a bad argument
 * is one `shardtrain: error: command line:N:` line where N = index + 1
 * (the CLI passes argv + 1). */
int st_bench_comm_main(int argc, char **argv);

#endif
