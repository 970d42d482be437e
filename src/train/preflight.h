/* What train refuses before it starts any work, for train itself and for
 * `shardtrain check --inputs`, which makes the same checks on a login node
 * before a job is queued: a bad input is then one error line there, not a
 * job that waited hours in the queue to fail in its first second. */
#ifndef ST_PREFLIGHT_H
#define ST_PREFLIGHT_H

#include <stdint.h>
#include <stdio.h>

#include "config/config.h"
#include "model/model.h"

/* The rules train applies to the configuration alone, after loading it:
 * with world > 0 ranks, global_batch a multiple of micro_batch x world;
 * data.train given; data.val given when train.eval_every is set;
 * data.tokenizer loadable and within model.vocab_size.  Returns 0, or
 * prints one error line at the key's configuration line and returns
 * ST_EXIT_USAGE. */
int st_preflight_config(const st_config *cfg, int world);

/* Its first rule alone, for `estimate --time`, which projects a run on
 * world ranks without needing its inputs. */
int st_preflight_batch(const st_config *cfg, int world);

/* The inputs train opens at start, opened and closed again without
 * loading any weights or starting anything: the data.train and data.val
 * shards (headers, token ranges, sizes), model.init's headers against the
 * configured shape, log.dir and checkpoint.dir (writable, or creatable:
 * nothing is created here; no special file where a checkpoint would go,
 * ckpt/checkpoint.h), and the checkpoint a resume would load (its
 * manifest against the shape).  What each holds is written to out as INI comment
 * lines ("; ..."), so that `check` output stays INI.  Returns 0, or prints
 * one error line and returns an exit status. */
int st_preflight_inputs(const st_config *cfg, FILE *out);

/* The room the run needs in checkpoint.dir at its fullest (its saves
 * from step resume_step on, -1 or 0 for a fresh start, and the final
 * weights) against the free space of its file system: one warning line
 * when short (exit statuses are not changed: space comes and goes, and a
 * save that meets a full disk fails whole), and with out the figures as
 * INI comments.  For check --inputs, and for train at start on rank 0. */
void st_preflight_room(const st_config *cfg, const st_model *m, int64_t resume_step, FILE *out);

/* checkpoint.dir/final, where the final weights go, is not a file (found
 * at start, not after the training).  Returns 0, or prints one error line
 * at checkpoint.dir's configuration line and returns ST_EXIT_USAGE. */
int st_preflight_final_dir(const st_config *cfg);

/* Train's error for an output directory (log.dir, checkpoint.dir) it
 * cannot create or write, err the errno that says why: one line at the
 * key's configuration line; returns ST_EXIT_USAGE. */
int st_preflight_output_dir_error(const st_config *cfg, const char *section, const char *key,
                                  const char *dir, int err);

#endif
