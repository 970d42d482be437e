/* Staged files, renamed into their directory all together (stage_dir.h).
 * The old files are hard-linked into the stage's .old before the first
 * rename, so that while the renames run every name in OUT_DIR still holds
 * a whole file (old or new), and a failed rename can put the old ones back
 * by renaming again.  A file system without hard links gets the old file
 * renamed aside instead, which leaves the name empty for a moment.
 *
 * The renames are many system calls, and a process killed between two of
 * them (a node failing, Slurm's SIGKILL at the time limit) would leave out
 * with some files new and some old.  So before the first rename the stage
 * gets a journal, .commit, naming the files in order with whether each
 * replaces an old one; a failed rename rewrites it to say the roll-back
 * has begun.  The next st_stage_begin in out finds the journal and
 * finishes what was interrupted, forward (every file still in the stage
 * moved in: all were whole, or there would be no journal) or back (every
 * old copy in .old renamed back, every new file that had none removed),
 * instead of clearing the stage; and readers of a model directory refuse
 * one whose journal is there (st_stage_check_whole), unless the write it
 * records is over (every file moved in, or every one put back).  A
 * roll-back whose "back" cannot be written is not begun: the journal's
 * forward stays the truth.  A roll-back that cannot put a file back keeps
 * the stage, journal and old copies as a kill would leave them, for the
 * next write to finish. */
#include "base/stage_dir.h"
#include "base/files.h"
#include "base/log.h"
#include "base/test_faults.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The journal of a commit in progress, inside the stage. */
#define JOURNAL_NAME ".commit"
#define JOURNAL_HEADER "shardtrain stage journal 1\n"

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

int st_rm_rf(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? 0 : -1;
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int finish_interrupted(st_stage *s);

int st_stage_begin(st_stage *s, const char *out)
{
    if ((size_t)snprintf(s->out, sizeof s->out, "%s", out) >= sizeof s->out) {
        st_error(out, "path too long");
        return ST_EXIT_FAILURE;
    }
    snprintf(s->dir, sizeof s->dir, "%s/%s", out, ST_STAGE_NAME);
    struct stat sb;
    const int there = stat(out, &sb) == 0;
    if ((there && !S_ISDIR(sb.st_mode)) || (!there && errno == ENOTDIR)) {
        st_error(out, "%s, not a directory; hint: give a directory for the files (it is "
                 "created if missing)", there ? "is a file" : "has a file in its path");
        return ST_EXIT_USAGE;
    }
    s->made_out = !there;
    s->lock_fd = -1;
    int rc = st_mkdir_p(out);
    if (rc)
        return rc;
    s->lock_fd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->lock_fd >= 0 && flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0 &&
        errno == EWOULDBLOCK) {
        st_error(out, "another shardtrain is writing files into this directory; hint: wait "
                 "for it to finish, or give another directory");
        close(s->lock_fd);
        s->lock_fd = -1;
        return ST_EXIT_FAILURE;
    }
    /* A stage with a journal is the half of a write that must be finished,
     * not cleared. */
    if ((rc = finish_interrupted(s))) {
        s->dir[0] = '\0';   /* the abort below leaves the stage as it is */
        st_stage_abort(s);
        return rc;
    }
    if (st_rm_rf(s->dir) != 0 || mkdir(s->dir, 0777) != 0) {
        st_error(s->dir, "cannot create the staging directory: %s; hint: check that %s is "
                 "writable", strerror(errno), out);
        st_stage_abort(s);
        return ST_EXIT_FAILURE;
    }
    return 0;
}

void st_stage_abort(st_stage *s)
{
    int saved = errno;
    if (s->dir[0])
        st_rm_rf(s->dir);
    if (s->made_out)
        rmdir(s->out);   /* only if empty: mkdir -p's parents are left */
    if (s->lock_fd >= 0)
        close(s->lock_fd);   /* releases the flock */
    s->lock_fd = -1;
    errno = saved;
}

int st_stage_finish(st_stage *s, int rc)
{
    if (rc) {
        st_stage_abort(s);
        return rc;
    }
    return st_stage_commit(s);
}

/* How an old file of out was kept before its replacement's rename. */
enum kept {
    KEPT_NONE, KEPT_LINK, KEPT_MOVED,
    KEPT_STUCK,      /* a replaced file whose old copy could not go back */
    KEPT_NEW_LEFT,   /* a new file (no old one) that could not be removed */
};

/* What the journal records of a staged file, before anything moves. */
enum {
    HAD_OLD = 1,   /* out held a file of its name, which it replaces */
    NEW_DIR = 2,   /* its directory in out did not exist */
};

/* The staged files, as paths relative to the stage, and what became of
 * each: the old file's keeping, and the directory of out created for it. */
typedef struct {
    char **rel;
    enum kept *kept;
    char **made_dir;   /* out/sub created for rel[i] (NULL: none) */
    unsigned char *flags;   /* HAD_OLD | NEW_DIR, as the journal records */
    int n, cap;
} staged_files;

static staged_files *walk_into;   /* nftw passes no context */
static size_t walk_skip;          /* strlen(stage dir) + 1 */

static int collect(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)ftw;
    staged_files *f = walk_into;
    if (flag != FTW_F || !S_ISREG(sb->st_mode))
        return 0;
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        char **r = realloc(f->rel, sizeof *r * (size_t)cap);
        if (!r)
            return -1;
        f->rel = r;
        f->cap = cap;
    }
    if (!(f->rel[f->n] = strdup(path + walk_skip)))
        return -1;
    f->n++;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void staged_free(staged_files *f)
{
    for (int i = 0; i < f->n; i++) {
        free(f->rel[i]);
        if (f->made_dir)
            free(f->made_dir[i]);
    }
    free(f->rel);
    free(f->kept);
    free(f->made_dir);
    free(f->flags);
}

/* dir/name in buf (n bytes), cut short if it does not fit: the stage's
 * own paths are bounded (st_stage) and its names are the callers' short
 * file names, so the callers' buffers always hold it. */
static void join(char *buf, size_t n, const char *dir, const char *name)
{
    if ((size_t)snprintf(buf, n, "%s/%s", dir, name) >= n)
        buf[n - 1] = '\0';
}

/* Where the old file of rel[i] is kept: .old/i, flat, whatever its
 * subdirectory. */
static void kept_path(char *buf, size_t n, const char *old, int i)
{
    char idx[16];
    snprintf(idx, sizeof idx, "%d", i);
    join(buf, n, old, idx);
}

/* Whether path is the file sb describes (a kept hard link to it). */
static int is_file(const char *path, const struct stat *sb)
{
    struct stat now;
    return lstat(path, &now) == 0 && now.st_ino == sb->st_ino && now.st_dev == sb->st_dev;
}

/* rename(2) of an old file back into place, or (from NULL) unlink(2) of
 * a new one; a test can make either fail. */
static int put_back(const char *from, const char *to)
{
    if (st_fault_stage_stuck()) {
        errno = EIO;
        return -1;
    }
    if (!from)
        return unlink(to) != 0 && errno != ENOENT ? -1 : 0;
    return rename(from, to);
}

/* Puts out back as it was before files 0..upto were renamed in (upto
 * itself not renamed in: its old file, if moved aside, goes back).
 * Returns how many files could not be put back, each marked KEPT_STUCK
 * (an old copy kept) or KEPT_NEW_LEFT (a new file left in out). */
static int roll_back(st_stage *s, const char *old, staged_files *f, int upto)
{
    int stuck = 0;
    char from[8600], to[8600];
    for (int j = upto; j >= 0; j--) {
        join(to, sizeof to, s->out, f->rel[j]);
        kept_path(from, sizeof from, old, j);
        int r = 0;
        const int old_back = j == upto ? f->kept[j] == KEPT_MOVED : f->kept[j] != KEPT_NONE;
        if (old_back)
            r = put_back(from, to);
        else if (j != upto)
            r = put_back(NULL, to);
        if (r == 0 && old_back)
            st_fault_stage_kill_in_rollback();
        if (r != 0) {
            f->kept[j] = f->kept[j] == KEPT_NONE ? KEPT_NEW_LEFT : KEPT_STUCK;
            stuck++;
        }
        if (f->made_dir[j])
            rmdir(f->made_dir[j]);
    }
    return stuck;
}

/* Refuses, before anything moves, a path of out that is in the way:
 * renaming a file over a directory fails, and moving the directory aside
 * would delete it with the stage. */
static int in_the_way(const st_stage *s, const staged_files *f)
{
    char to[8600];
    for (int i = 0; i < f->n; i++) {
        struct stat sb;
        join(to, sizeof to, s->out, f->rel[i]);
        for (char *slash = to + strlen(s->out) + 1; (slash = strchr(slash, '/')); slash++) {
            *slash = '\0';
            int bad = lstat(to, &sb) == 0 && !S_ISDIR(sb.st_mode);
            if (bad) {
                st_error(to, "is a file where a directory of the files being written goes; "
                         "hint: move it away, or write to another directory");
                return ST_EXIT_USAGE;
            }
            *slash = '/';
        }
        const int rc = st_refuse_special(to);
        if (rc)
            return rc;
    }
    return 0;
}

/* Moves staged file i into place: its directory made if missing, the old
 * file kept, then the rename.  0, or -1 with errno. */
static int move_in(st_stage *s, const char *old, staged_files *f, int i)
{
    char to[8600], from[8600], keep[8600];
    struct stat sb;
    join(to, sizeof to, s->out, f->rel[i]);
    join(from, sizeof from, s->dir, f->rel[i]);
    kept_path(keep, sizeof keep, old, i);
    char *slash = strrchr(to, '/');
    *slash = '\0';
    if (stat(to, &sb) != 0) {
        if (mkdir(to, 0777) != 0)
            return -1;
        f->made_dir[i] = strdup(to);
    }
    *slash = '/';
    if (lstat(to, &sb) == 0) {
        if (link(to, keep) == 0)
            f->kept[i] = KEPT_LINK;
        else if (rename(to, keep) == 0)
            f->kept[i] = KEPT_MOVED;
        else
            return -1;
    }
    const char *name = strrchr(f->rel[i], '/');
    st_fault_stage_kill_before(name ? name + 1 : f->rel[i]);
    if (st_fault_stage_full(name ? name + 1 : f->rel[i])) {
        errno = ENOSPC;
        return -1;
    }
    if (rename(from, to) != 0)
        return -1;
    st_fault_stage_kill_after(name ? name + 1 : f->rel[i]);
    return 0;
}

/* Fills f->flags from out as it is now, before any rename. */
static int journal_flags(const st_stage *s, staged_files *f)
{
    if (!(f->flags = calloc((size_t)f->n + 1, 1)))
        return -1;
    char to[8600];
    struct stat sb;
    for (int i = 0; i < f->n; i++) {
        join(to, sizeof to, s->out, f->rel[i]);
        if (lstat(to, &sb) == 0)
            f->flags[i] |= HAD_OLD;
        *strrchr(to, '/') = '\0';
        if (stat(to, &sb) != 0)
            f->flags[i] |= NEW_DIR;
    }
    return 0;
}

/* Writes the journal, atomically and durably, with state "forward" or
 * "back": 0, or -1 with errno. */
static int write_journal(const st_stage *s, const staged_files *f, const char *state)
{
    size_t len = sizeof JOURNAL_HEADER + strlen(state) + 2;
    for (int i = 0; i < f->n; i++)
        len += strlen(f->rel[i]) + 4;
    char *text = malloc(len), path[8600], tmp[8600];
    if (!text) {
        errno = ENOMEM;
        return -1;
    }
    size_t at = (size_t)snprintf(text, len, "%s%s\n", JOURNAL_HEADER, state);
    for (int i = 0; i < f->n; i++)
        at += (size_t)snprintf(text + at, len - at, "%c%c %s\n",
                               f->flags[i] & HAD_OLD ? 'o' : '-',
                               f->flags[i] & NEW_DIR ? 'd' : '-', f->rel[i]);
    join(path, sizeof path, s->dir, JOURNAL_NAME);
    join(tmp, sizeof tmp, s->dir, JOURNAL_NAME ".tmp");
    const int rc = st_file_write_atomic(path, tmp, 0666, st_file_write_string, text);
    const int e = errno;
    free(text);
    errno = e;
    return rc == ST_ATOMIC_DONE ? 0 : -1;
}

/* Reads the journal at path into f (its files and flags) and *back (the
 * roll-back had begun): 1, 0 when there is none, -1 when it cannot be
 * read or is not one (a name that would leave out among them). */
static int read_journal(const char *path, staged_files *f, int *back)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return errno == ENOENT ? 0 : -1;
    char line[4200];
    int ok = fgets(line, sizeof line, fp) && !strcmp(line, JOURNAL_HEADER) &&
             fgets(line, sizeof line, fp) &&
             (!strcmp(line, "forward\n") || !strcmp(line, "back\n"));
    *back = ok && line[0] == 'b';
    while (ok && fgets(line, sizeof line, fp)) {
        size_t n = strlen(line);
        char *rel = line + 3;
        ok = n > 4 && line[n - 1] == '\n' && strchr("o-", line[0]) &&
             strchr("d-", line[1]) && line[2] == ' ' && rel[0] != '/' &&
             strncmp(rel, "../", 3) != 0 && !strstr(rel, "/../");
        line[n - 1] = '\0';
        if (ok && f->n == f->cap) {
            int cap = f->cap ? 2 * f->cap : 8;
            char **r = realloc(f->rel, sizeof *r * (size_t)cap);
            unsigned char *fl = realloc(f->flags, (size_t)cap);
            f->rel = r ? r : f->rel;
            f->flags = fl ? fl : f->flags;
            ok = r && fl;
            f->cap = ok ? cap : f->cap;
        }
        if (ok && (ok = (f->rel[f->n] = strdup(rel)) != NULL))
            f->flags[f->n++] = (unsigned char)((line[0] == 'o' ? HAD_OLD : 0) |
                                               (line[1] == 'd' ? NEW_DIR : 0));
    }
    fclose(fp);
    if (!ok)
        errno = EINVAL;
    return ok ? 1 : -1;
}

static int finish_interrupted(st_stage *s)
{
    staged_files f = {0};
    char journal[8600], from[8600], to[8600], keep[8600], old[8400];
    int back = 0, done = 0, removed = 0;
    snprintf(to, sizeof to, "%s", s->out);
    join(journal, sizeof journal, s->dir, JOURNAL_NAME);
    join(old, sizeof old, s->dir, ".old");
    const int there = read_journal(journal, &f, &back);
    if (there <= 0) {
        staged_free(&f);
        if (there < 0)
            st_error(journal, "cannot read the record of a write that was interrupted "
                     "here: %s; hint: compare the files in %s with %s, keep what is "
                     "wanted, and remove %s", strerror(errno), s->dir, s->out, s->dir);
        return there < 0 ? ST_EXIT_FAILURE : 0;
    }
    struct stat sb;
    int rc = 0;
    for (int k = 0; k < f.n && !rc; k++) {
        /* Forward in the commit's order; back in the roll-back's. */
        const int i = back ? f.n - 1 - k : k;
        join(from, sizeof from, s->dir, f.rel[i]);
        join(to, sizeof to, s->out, f.rel[i]);
        kept_path(keep, sizeof keep, old, i);
        const int staged = lstat(from, &sb) == 0;
        if (!back && staged) {
            char *slash = strrchr(to, '/');
            *slash = '\0';
            rc = mkdir(to, 0777) != 0 && errno != EEXIST;
            *slash = '/';
            rc = rc || rename(from, to) != 0;
            done += !rc;
        } else if (back && lstat(keep, &sb) == 0) {
            /* A kept link to the file still in place (its replacement
             * never moved in) needs nothing. */
            const int same = is_file(to, &sb);
            rc = !same && rename(keep, to) != 0;
            done += !rc && !same;
        } else if (back && !staged && !(f.flags[i] & HAD_OLD)) {
            rc = unlink(to) != 0 && errno != ENOENT;
            removed += !rc;
        }
        if (!rc && back && (f.flags[i] & NEW_DIR)) {
            *strrchr(to, '/') = '\0';
            rmdir(to);   /* only if empty */
        }
    }
    for (int i = 0; i < f.n && !rc; i++) {
        join(to, sizeof to, s->out, f.rel[i]);
        if (strchr(f.rel[i], '/') && stat(to, &sb) == 0)
            rc = st_fsync_parent(to) != 0;
    }
    rc = rc || st_fsync_dir(s->out) != 0;
    if (rc)
        st_error(to, "cannot %s the write that a killed shardtrain left half done: %s; "
                 "hint: the record of it is %s; check free space and permissions and "
                 "write again", back ? "undo" : "finish", strerror(errno), journal);
    else if (back)
        st_warn("%s: a shardtrain left a failed write here half undone (it was killed, or "
                "could not put a file back); the undoing is now finished (%d old file%s put "
                "back, %d new removed)", s->out, done, done == 1 ? "" : "s", removed);
    else if (!done)
        st_warn("%s: a shardtrain was killed just after moving its files in here; its "
                "record of them is now cleared (all %d had moved in)", s->out, f.n);
    else
        st_warn("%s: a shardtrain was killed while moving its files in here; its write "
                "is now finished (%d of its %d files moved in now)", s->out, done, f.n);
    staged_free(&f);
    return rc ? ST_EXIT_FAILURE : 0;
}

int st_stage_check_whole(const char *dir)
{
    char journal[8600], staged[8600], old[8400], to[8600];
    struct stat sb;
    snprintf(journal, sizeof journal, "%s/%s/%s", dir, ST_STAGE_NAME, JOURNAL_NAME);
    snprintf(old, sizeof old, "%s/%s/.old", dir, ST_STAGE_NAME);
    if (lstat(journal, &sb) != 0)
        return 0;
    /* The journal of a write that is over, left by a kill before the stage
     * was removed, is no reason to refuse: forward with none of its files
     * still staged (every file new), or back with every kept old copy
     * renamed back, or still the file in place, and every new file that
     * had no old one gone (every file old). */
    staged_files f = {0};
    int back = 0, over = read_journal(journal, &f, &back) == 1;
    for (int i = 0; i < f.n && over; i++) {
        join(to, sizeof to, dir, f.rel[i]);
        if (!back) {
            snprintf(staged, sizeof staged, "%s/%s/%s", dir, ST_STAGE_NAME, f.rel[i]);
            over = lstat(staged, &sb) != 0 && errno == ENOENT;
            continue;
        }
        kept_path(staged, sizeof staged, old, i);
        if (lstat(staged, &sb) == 0)
            over = is_file(to, &sb);
        else if (!(f.flags[i] & HAD_OLD))
            over = lstat(to, &sb) != 0 && errno == ENOENT;
    }
    staged_free(&f);
    if (over)
        return 0;
    st_error(dir, "holds files half %s by a shardtrain that was %s (%s names them); hint: "
             "run the export or training that writes this directory again: it first "
             "finishes the interrupted write", back ? "put back" : "moved in",
             back ? "killed, or could not put them back, after a failed write" :
             "killed while writing them", journal);
    return ST_EXIT_USAGE;
}

int st_stage_commit(st_stage *s)
{
    staged_files f = {0};
    char old[8400], to[8600];
    walk_into = &f;
    walk_skip = strlen(s->dir) + 1;
    if (nftw(s->dir, collect, 16, FTW_PHYS) != 0) {
        st_error(s->dir, "cannot list the staged files: %s", strerror(errno));
        staged_free(&f);
        st_stage_abort(s);
        return ST_EXIT_FAILURE;
    }
    if (f.n)
        qsort(f.rel, (size_t)f.n, sizeof *f.rel, by_name);
    int rc = in_the_way(s, &f), keep_stage = 0;
    f.kept = calloc((size_t)f.n + 1, sizeof *f.kept);
    f.made_dir = calloc((size_t)f.n + 1, sizeof *f.made_dir);
    join(old, sizeof old, s->dir, ".old");
    if (!rc && (!f.kept || !f.made_dir || mkdir(old, 0777) != 0)) {
        st_error(old, "cannot keep the old files: %s",
                 f.kept && f.made_dir ? strerror(errno) : "out of memory");
        rc = ST_EXIT_FAILURE;
    }
    if (!rc && (journal_flags(s, &f) != 0 || write_journal(s, &f, "forward") != 0)) {
        st_error(s->dir, "cannot record the files about to be moved: %s; hint: %s is as "
                 "it was; check free space and permissions", strerror(errno), s->out);
        rc = ST_EXIT_FAILURE;
    }
    for (int i = 0; i < f.n && !rc; i++) {
        if (move_in(s, old, &f, i) == 0)
            continue;
        const int e = errno;
        join(to, sizeof to, s->out, f.rel[i]);
        /* A roll-back that could not be recorded is not begun: killed
         * part-way, it would be finished forward with the files it had put
         * back staying old.  The journal still says forward, which is the
         * truth, so readers refuse out and the next write finishes it. */
        if (st_fault_stage_no_back() ? (errno = ENOSPC, 1) : write_journal(s, &f, "back") != 0) {
            char keep[8600];
            kept_path(keep, sizeof keep, old, i);
            if (f.kept[i] == KEPT_MOVED)
                rename(keep, to);   /* its name is not left empty meanwhile */
            st_error(to, "cannot move the new file into place: %s; hint: nor record the "
                     "undoing (%s), so %s is left with %d of its %d files new, which "
                     "readers refuse; free some space and write again: that finishes "
                     "this write first", strerror(e), strerror(errno), s->out, i, f.n);
            keep_stage = 1;
            rc = ST_EXIT_FAILURE;
            break;
        }
        const int stuck = roll_back(s, old, &f, i);
        st_fault_stage_kill_after_rollback();
        if (!stuck) {
            st_error(to, "cannot move the new file into place: %s; hint: %s is as it was; "
                     "check free space and permissions", strerror(e), s->out);
            rc = ST_EXIT_FAILURE;
            break;
        }
        /* What could not be put back stays as the journal records it: the
         * stage with its "back" journal and the old copies in .old is kept,
         * so readers refuse out and the next write into it puts the old
         * copies back first, exactly as after a kill here. */
        int n_old = 0, n_new = 0;
        char olds[2048] = "", news[2048] = "", why[12800] = "";
        for (int j = 0, a = 0, b = 0; j <= i; j++) {
            if (f.kept[j] == KEPT_STUCK && a < (int)sizeof olds) {
                a += snprintf(olds + a, sizeof olds - (size_t)a, "%s%s as %d", a ? ", " : "",
                              f.rel[j], j);
                n_old++;
            } else if (f.kept[j] == KEPT_NEW_LEFT && b < (int)sizeof news) {
                b += snprintf(news + b, sizeof news - (size_t)b, "%s%s", b ? ", " : "",
                              f.rel[j]);
                n_new++;
            }
        }
        if (n_old)
            snprintf(why, sizeof why, "%d replaced file%s could not be put back (the old "
                     "copies are in %s: %s)", n_old, n_old > 1 ? "s" : "", old, olds);
        if (n_new)
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%d new file%s could "
                     "not be removed (%s)", n_old ? "; " : "", n_new, n_new > 1 ? "s" : "",
                     news);
        st_error(to, "cannot move the new file into place: %s; hint: %s; readers refuse %s "
                 "until the next write into it, which first finishes putting it back",
                 strerror(e), why, s->out);
        keep_stage = 1;
        rc = ST_EXIT_FAILURE;
    }
    /* The renames into subdirectories are made durable there. */
    for (int i = 0; i < f.n && !rc; i++) {
        join(to, sizeof to, s->out, f.rel[i]);
        if (strchr(f.rel[i], '/') && st_fsync_parent(to) != 0)
            rc = -1;
    }
    if (!rc && st_fsync_dir(s->out) != 0)
        rc = -1;
    if (rc == -1) {
        st_error(s->out, "the new files are in place, but the directory cannot be synced: "
                 "%s; hint: a crash now could lose them", strerror(errno));
        rc = ST_EXIT_FAILURE;
    }
    staged_free(&f);
    if (keep_stage)
        s->dir[0] = '\0';   /* the abort below then leaves it */
    st_stage_abort(s);   /* out itself stays unless it is empty and new */
    return rc;
}
