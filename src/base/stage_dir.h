/* A set of files that replaces its namesakes in a directory all together
 * or not at all.  `shardtrain export` writes model.safetensors,
 * config.json and the rest one by one; writing each straight into
 * OUT_DIR meant a failure part-way (a full disk, a bad tokenizer found
 * after the weights) left the new weights beside the old config.json, a
 * model directory that loads and is wrong.  Instead the files go into a
 * stage, OUT_DIR/.shardtrain-stage, and only when every one is written
 * are they renamed into OUT_DIR, each old file kept (hard-linked) in the
 * stage until the last rename has worked, so that a rename that fails puts
 * every earlier one back.  Files of OUT_DIR the set does not name are left
 * as they are.  Training's checkpoint.dir/final is written the same way.
 * The staged files may sit in subdirectories (final/adapter/), which are
 * made in OUT_DIR as needed and removed again by a roll-back.  A process
 * killed between the renames leaves a journal in the stage, and the next
 * write into OUT_DIR finishes the interrupted one first (stage_dir.c). */
#ifndef ST_STAGE_DIR_H
#define ST_STAGE_DIR_H

#include <stddef.h>

typedef struct {
    char out[4096];   /* the directory the files are for */
    char dir[4200];   /* out/.shardtrain-stage, where they are written */
    int made_out;     /* st_stage_begin created out: an abort removes it */
    int lock_fd;      /* out, opened to hold flock(2) on it while staging */
} st_stage;

/* The stage's directory name inside out. */
#define ST_STAGE_NAME ".shardtrain-stage"

/* Creates out (mkdir -p) and an empty stage in it, removing a stage that
 * an interrupted run left behind (one whose commit was under way is
 * first finished, forward or back, with a warning line).  Holds an exclusive flock(2) on out
 * until the commit or abort, so that two shardtrains writing the same
 * directory at once cannot take each other's stage: the second is refused
 * (a file system without flock is used unlocked).  Returns 0, or prints one error line and
 * returns ST_EXIT_USAGE (out, or a part of its path, is a file) or
 * ST_EXIT_FAILURE. */
int st_stage_begin(st_stage *s, const char *out);

/* Moves every regular file of the stage (in name order, by path relative
 * to the stage) into out, replacing files of the same name, then removes
 * the stage.  Before any rename, a name that is
 * something other than a file or a symbolic link in out (a directory) is
 * refused.  A rename that fails puts back the files already replaced and
 * removes those that are new.  Returns 0, or prints one error line and
 * returns an exit status: ST_EXIT_USAGE, refused; ST_EXIT_FAILURE, a
 * rename failed, out then as it was (or, where an old file could not be
 * put back or a new one removed, the error names them, and the stage is
 * kept with its journal and the old copies: readers refuse out, and the
 * next st_stage_begin there puts them back), or every file is in place
 * but out could not be fsynced. */
int st_stage_commit(st_stage *s);

/* Removes the stage and everything in it (after a failed write); out is
 * as it was, or gone again if st_stage_begin created it.  Quiet: the
 * write's own error has been printed. */
void st_stage_abort(st_stage *s);

/* The end of a write into the stage whose status is rc: 0 commits
 * (st_stage_commit's status is returned), anything else aborts and is
 * returned as it is. */
int st_stage_finish(st_stage *s, int rc);

/* Whether dir is whole: 0, or (it holds the journal of a write killed
 * while moving its files in, which the next st_stage_begin there
 * finishes) one error line and ST_EXIT_USAGE.  A journal whose write is
 * over (a process killed after its last rename, or after its roll-back)
 * is whole.  For readers of a model directory, which would otherwise read
 * old files beside new ones. */
int st_stage_check_whole(const char *dir);

/* rm -rf path: 0 (also when nothing is there), or -1 with errno. */
int st_rm_rf(const char *path);

#endif
