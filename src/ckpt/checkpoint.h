/* Sharded, verified, reshardable checkpoints: saving (checkpoint_write.c),
 * reading, validation and resharding (checkpoint_read.c), resuming a run
 * (checkpoint_resume.c) and the export to
 * Hugging Face (export.c; the command is cli/cmd_export.c).  When to save
 * is the train loop's policy (train/boundary.h).
 *
 * A checkpoint is DIR/step_NNNNNNNN/ holding manifest.json and one file per
 * shard index, shard_IIIII-of-SSSSS.bin.  A shard file holds, for each unit
 * in order, this shard's slice of the fp32 master parameters, then of
 * AdamW's first moment, then of its second moment (each `shard` elements,
 * little-endian).  Replicas (hybrid_shard, no_shard) hold identical slices,
 * so only replicate index 0 writes.  The manifest records the layout, the
 * tensor table of what trains (with LoRA, the adapters: the frozen base
 * weights are model.init's, read again on resume, and named in the
 * manifest's "lora" object), the step, the optimizer's step count, the
 * config, and an
 * XXH64 of every file and of every 1 MiB block of it, so that a rank that
 * reads only some byte ranges can still verify every byte it uses, and
 * ends with its own checksum (ckpt/manifest_seal.h). */
#ifndef ST_CHECKPOINT_H
#define ST_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "engine/fsdp.h"
#include "model/model.h"
#include "runtime/runtime.h"

#define ST_CKPT_FORMAT 2   /* 2: the manifest is sealed (ckpt/manifest_seal.h) */
#define ST_CKPT_MANIFEST_MAX (256 << 20)
#define ST_CKPT_BLOCK ((int64_t)1 << 20)
#define ST_CKPT_MANIFEST "manifest.json"
#define ST_CKPT_LATEST "latest"

/* ---- writing (checkpoint_write.c) ------------------------------------- */

/* The step directory of `step` completed steps in checkpoint directory
 * dir: DIR/step_NNNNNNNN. */
void st_ckpt_step_dir(const char *dir, int64_t step, char *buf, size_t n);

/* A FIFO, socket or device in checkpoint directory dir at a name a save
 * writes under (step_NNNNNNNN, or its .tmp-step_ and .old-step_
 * namesakes), of any step: a run may save at any step (a preemption
 * signal), and the save would move it aside to be pruned.  For train's
 * start-up checks, before any work; a save checks its own names again.
 * One error line naming it and ST_EXIT_USAGE, or 0 (also when dir is not
 * there yet). */
int st_ckpt_refuse_special(const char *dir);

/* Write the checkpoint of `step` completed steps into checkpoint.dir:
 * temporary directory, fsync, rename, then (after every rank is done) the
 * `latest` pointer and pruning to checkpoint.keep.  Collective over the
 * world.  Returns an exit status, the same on every rank. */
int st_ckpt_save(st_fsdp *f, const st_config *cfg, const st_runtime *rt, int64_t step);

/* ---- reading (checkpoint_read.c) -------------------------------------- */

typedef struct {
    char dir[4096];
    char manifest_path[4200];
    void *root;              /* json_t * of the manifest */
    int64_t step, opt_steps;
    int n_files;             /* shard files: the saved shard group size */
    int64_t block;           /* checksum block bytes */
    int64_t file_bytes;      /* every shard file has this size */
    int n_units;
    int64_t *numel, *shard;  /* per unit, as saved */
    int64_t *unit_off;       /* byte offset of a unit's three arrays in a file */
    int64_t n_blocks;
    uint64_t *block_hash;    /* [n_files * n_blocks] */
    int *fd;                 /* per file, -1 until first needed */
    char **file_path;
    int have_model;
    st_model_config model;   /* the model shape saved in the manifest */
    /* Its LoRA adapters (rank 0: none): then the shards hold the
     * adapters only, and the base weights are lora_base's (model.init). */
    st_lora_config lora;
    char lora_base[4096];
} st_ckpt;

/* Open the step directory `dir` and validate its manifest (format, fields,
 * file names) and, when m is not NULL, that it was written for the same
 * model shape.  On failure fills err with "WHERE: what; hint" and returns
 * ST_EXIT_USAGE (c is then safe to close). */
int st_ckpt_open(st_ckpt *c, const char *dir, const st_model *m, char *err, size_t errn);
void st_ckpt_close(st_ckpt *c);
/* Elements [lo, hi) of unit u's array `which` (0 params, 1 adam_m, 2
 * adam_v) in the flat padded numbering into out, reading only the byte
 * ranges (rounded out to checksum blocks) of the files that hold them and
 * verifying every block read; elements past the unit's numel are padding
 * and read as 0.  Errors as st_ckpt_open. */
int st_ckpt_read_range(st_ckpt *c, int u, int which, int64_t lo, int64_t hi, float *out,
                       char *err, size_t errn);
/* The step directory a path names: itself when it holds a manifest, else
 * the one its `latest` file names.  Returns 0, or ST_EXIT_USAGE with err. */
int st_ckpt_resolve(const char *path, char *out, size_t n, char *err, size_t errn);

/* ---- resuming (checkpoint_resume.c) ------------------------------------ */

/* Resolve checkpoint.resume (auto: `latest`, falling back to older good
 * checkpoints with a warning; never; a path) and load this rank's shards
 * of the parameters and moments into f, whatever layout they were saved
 * in.  *start_step is the number of steps already done (0 for a fresh
 * start).  Collective: every rank loads the same checkpoint or all fail
 * with one error line.  Returns an exit status. */
int st_ckpt_resume(st_fsdp *f, const st_config *cfg, const st_runtime *rt,
                   int64_t *start_step);

/* The steps of dir's step directories (step_NNNNNNNN), newest first, in
 * *out (malloc'd; NULL when none): how many. */
size_t st_ckpt_list_steps(const char *dir, long long **out);

/* Which checkpoint st_ckpt_resume would load, found the same way
 * (checkpoint.resume: never, a path, or auto with its fall-back to older
 * step directories, each skipped one a warning), loading nothing: each
 * manifest is checked against the model m and train.steps, and every
 * block of the shards that a resume would read is verified (a corrupt one
 * is skipped as the resume skips it).  For `shardtrain check --inputs`.
 * Returns 0 with dir (n bytes) and *step set, or dir "" and *step -1 for a
 * fresh start; or prints one error line and returns ST_EXIT_USAGE where
 * st_ckpt_resume would refuse (ST_EXIT_FAILURE: out of memory). */
int st_ckpt_resume_plan(const st_config *cfg, const st_model *m, char *dir, size_t n,
                        int64_t *step);

/* ---- export (export.c) ------------------------------------------------ */

/* The work of `shardtrain export`: the checkpoint `ckpt` (a step directory,
 * or a directory whose `latest` names one) to out_dir as a Hugging Face
 * model directory (model.safetensors, config.json, generation_config.json;
 * with tokenizer, a tokenizer.json or its directory, also the tokenizer
 * files: hf/hf_export.h).  A checkpoint.dir without step checkpoints but
 * with final weights (DIR/final), or that final directory itself, exports
 * those, *step set to -1.  One process, no MPI.  On success dir (n bytes)
 * holds the directory read and *step its step.  Returns an exit status,
 * the error printed.
 *
 * A LoRA checkpoint exports the base weights with its adapters merged
 * (base: the base model's files, NULL for the checkpoint's model.init), or,
 * with adapter set, the PEFT adapter directory (hf/lora_files.h). */
int st_ckpt_export_hf(const char *ckpt, const char *out_dir, const char *tokenizer,
                      int adapter, const char *base, char *dir, size_t n, int64_t *step);

#endif
