/* Test-only hooks: every environment variable through which the test suite
 * injects a fault or asks for extra output, read here and nowhere else, so
 * that production code asks a typed question ("is step 4 poisoned?") and a
 * reader finds every hook in one place.  In base/ so that any layer may ask.
 * Documented for users in shardtrain(1), ENVIRONMENT.
 *
 *   SHARDTRAIN_TEST_NONFINITE_STEPS=3,4   (tests/nonfinite.sh)
 *       The gradient of those steps (1-based, as logged) gets a NaN on the
 *       last rank only, so the other ranks learn of it only through the
 *       agreement on finite steps.  Malformed: exit status 2.
 *   SHARDTRAIN_TEST_CRASH_IN_CHECKPOINT=N (tests/checkpoint.sh)
 *       Every rank exits with status 1 in the middle of writing the
 *       checkpoint of step N (after part of its shard file), to show that
 *       a crash leaves the previous checkpoint loadable.
 *   SHARDTRAIN_TEST_CHECKPOINT_FULL_AT=N[:rename]   (tests/checkpoint.sh)
 *       The checkpoint of step N fails as on a full disk: the last shard's
 *       file gets ENOSPC after its first array (with :rename, every file
 *       is written and the rename of the step directory into place gets
 *       ENOSPC), to show that the failure is one error line and exit
 *       status 1 on every rank, that the partial step directory is
 *       removed, and that the previous checkpoint and `latest` are
 *       untouched (with :rename, also a directory of the same step that
 *       a repeated run was replacing).
 *   SHARDTRAIN_TEST_STAGE_FULL_AT=NAME[:stuck|:stuck-kill|:kill|:kill-after|
 *                                      :kill-back|:kill-back-done|:no-back]
 *       (tests/staged_writes.sh)  Moving the staged file NAME
 *       (config.json) into the directory an export writes, or into
 *       checkpoint.dir/final, gets ENOSPC, after the files before it in
 *       name order have replaced theirs, to show that the export or run
 *       fails with one error line and exit status 1 and leaves the
 *       directory as it was.  With :stuck, putting the replaced files back
 *       and removing the new ones fail too (EIO), to show that the old
 *       copies are kept, and the new files named, where the error line
 *       says, with the journal that makes readers refuse the directory and
 *       the next write put them back; :stuck-kill is :stuck with the
 *       process killed once the roll-back is over, which must leave the
 *       same.  With :kill, the process is killed (SIGKILL) just before
 *       moving NAME, and with :kill-back, after the ENOSPC, once the first
 *       replaced file has been put back: the directory is left half
 *       written, to show that readers refuse it and that the next write
 *       into it first finishes (:kill) or undoes (:kill-back) the
 *       interrupted one.  With :kill-after, the process is killed just
 *       after moving NAME (the last file: every file moved in, the stage
 *       and its journal left), to show that readers take the directory
 *       as whole; with :kill-back-done, once the roll-back after the
 *       ENOSPC is over (every old file back, the journal left), the same.
 *       With :no-back, recording the roll-back after the
 *       ENOSPC fails too, to show that nothing is then put back: the
 *       directory is left half written, refused by readers, and finished
 *       forward by the next write.
 *   SHARDTRAIN_TEST_LOG_FULL_AT=N          (tests/summary.sh)
 *       Rank 0's metrics.jsonl record of step N (and of every later step)
 *       fails as on a full disk: half the record is written, then ENOSPC,
 *       to show that the file is cut back to its last whole record, the
 *       failure is one error line, and the run ends with exit status 1.
 *   SHARDTRAIN_TEST_FREE_BYTES=N          (tests/check_inputs.sh)
 *       `check --inputs` takes checkpoint.dir's file system to have N
 *       bytes free, to show the warning when a run's checkpoints and
 *       final weights would not fit.
 *   SHARDTRAIN_TEST_KERNELS=cpu|cpu-bf16params   (tests/kernels.sh)
 *       Which CPU kernels backend runs; cpu-bf16params takes gathered
 *       parameters as bf16 words, as a GPU backend with bf16 kernels does.
 *       Unset or empty is cpu; anything else is exit status 2.
 *   SHARDTRAIN_DEBUG_IO (set to anything)   (tests/hf_import.sh)
 *       Each rank prints how many bytes it read loading model.init, so the
 *       test sees that a rank reads only its own slices.
 *   SHARDTRAIN_TEST_FAULT=RANK:POINT:ACTION[:N]
 *       (tests/watchdog_phases.sh, tests/fault_matrix.sh)  Rank RANK stops
 *       itself (ACTION stop: SIGSTOP) or dies (kill: SIGKILL) the N-th time
 *       (default 1) it reaches POINT: init (before MPI_Init), startup
 *       (after it, before the start-up collectives), step (the start of a
 *       training step), eval (before the validation loss's all-reduce),
 *       ckpt_begin, ckpt_shard (part-way through its shard file; writers
 *       only), ckpt_gather (before the gather of the block hashes),
 *       ckpt_publish (before rank 0 publishes the manifest), ckpt_done (a
 *       checkpoint committed, before the run log hears of it), final
 *       (before the final weights are gathered).  Malformed: exit status 2.
 *   SHARDTRAIN_TEST_PAUSE=start|setup|deferred   (tests/signals.sh)
 *       The process stops for up to 60 s at that point of its life (start:
 *       the top of main, before MPI; setup: the end of train's set-up,
 *       before the first step; deferred: just after, once a signal waits
 *       for the step boundary, standing for a call that blocks), after
 *       printing "paused at POINT" on
 *       stderr, so a test can send a signal exactly there.
 *
 * tests/watchdog.sh kills and stops ranks from outside and needs no hook. */
#ifndef ST_TEST_FAULTS_H
#define ST_TEST_FAULTS_H

#include <stdint.h>

/* Reads SHARDTRAIN_TEST_NONFINITE_STEPS for st_fault_poisoned_step.
 * Returns 0, or prints one error line and returns ST_EXIT_USAGE. */
int st_fault_load_poisoned_steps(void);
/* Whether the gradient of step1 (1-based) is to be poisoned, by the list
 * st_fault_load_poisoned_steps read (none before it is called). */
int st_fault_poisoned_step(int64_t step1);

/* Whether a rank writing the checkpoint of `step` is to die part-way. */
int st_fault_crash_in_checkpoint(int64_t step);
/* Whether the checkpoint of `step` is to fail as on a full disk at
 * `where`: "shard" (the last shard's file) or "rename" (the step
 * directory's rename into place). */
int st_fault_checkpoint_full(int64_t step, const char *where);
/* Whether moving the staged file `name` into place is to fail as on a
 * full disk (base/stage_dir.c). */
int st_fault_stage_full(const char *name);
/* Whether putting a replaced file back is to fail as well. */
int st_fault_stage_stuck(void);
/* Whether recording the roll-back of a failed move is to fail as well
 * (:no-back). */
int st_fault_stage_no_back(void);
/* Kills this process when the move of the staged file `name` is to be
 * interrupted (:kill). */
void st_fault_stage_kill_before(const char *name);
/* Kills this process just after the staged file `name` has moved into
 * place (:kill-after). */
void st_fault_stage_kill_after(const char *name);
/* Kills this process when a roll-back of the staged files is to be
 * interrupted (:kill-back), called once a file has been put back. */
void st_fault_stage_kill_in_rollback(void);
/* Kills this process once a roll-back is over, before the stage and its
 * journal are removed (:kill-back-done). */
void st_fault_stage_kill_after_rollback(void);
/* Whether the metrics record of `step` is to fail as on a full disk. */
int st_fault_log_full(int64_t step);

typedef enum {
    ST_FAULT_KERNELS_CPU,            /* the ordinary CPU backend */
    ST_FAULT_KERNELS_CPU_BF16PARAMS, /* CPU math on bf16 gathered parameters */
} st_fault_kernels;

/* The CPU kernels backend asked for in *variant.  Returns 0, or prints one
 * error line and returns ST_EXIT_USAGE. */
int st_fault_kernels_variant(st_fault_kernels *variant);

/* The fault point `point` (a name from the list above) is reached by
 * `rank`: stops or kills this process when SHARDTRAIN_TEST_FAULT says so. */
void st_fault_at(const char *point, long rank);

/* Pause at `point` when SHARDTRAIN_TEST_PAUSE names it. */
void st_fault_pause(const char *point);

/* Whether model.init loading reports the bytes it read. */
int st_fault_debug_io(void);

/* The free bytes SHARDTRAIN_TEST_FREE_BYTES gives (into *bytes: 1), or 0
 * when it is unset. */
int st_fault_free_bytes(uint64_t *bytes);

#endif
