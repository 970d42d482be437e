/* Staged files, renamed into their directory all together (stage_dir.h).
 * The old files are hard-linked into the stage's .old before the first
 * rename, so that while the renames run every name in OUT_DIR still holds
 * a whole file (old or new), and a failed rename can put the old ones back
 * by renaming again.  A file system without hard links gets the old file
 * renamed aside instead, which leaves the name empty for a moment. */
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

/* The staged files, as paths relative to the stage, and what became of
 * each: the old file's keeping, and the directory of out created for it. */
typedef struct {
    char **rel;
    enum kept *kept;
    char **made_dir;   /* out/sub created for rel[i] (NULL: none) */
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
        if (j == upto)
            r = f->kept[j] == KEPT_MOVED ? put_back(from, to) : 0;
        else if (f->kept[j] != KEPT_NONE)
            r = put_back(from, to);
        else
            r = put_back(NULL, to);
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
        if (lstat(to, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode)) {
            st_error(to, "is %s, not a file, and a file of this name is being written "
                     "here; hint: move it away, or write to another directory",
                     S_ISDIR(sb.st_mode) ? "a directory" : "a special file");
            return ST_EXIT_USAGE;
        }
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
    if (st_fault_stage_full(name ? name + 1 : f->rel[i])) {
        errno = ENOSPC;
        return -1;
    }
    return rename(from, to);
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
    for (int i = 0; i < f.n && !rc; i++) {
        if (move_in(s, old, &f, i) == 0)
            continue;
        const int e = errno;
        const int stuck = roll_back(s, old, &f, i);
        join(to, sizeof to, s->out, f.rel[i]);
        /* The old copies left are the user's: out of the stage, which the
         * next run would clear, into a directory of their own (or, if even
         * that fails, the stage is kept). */
        int n_old = 0, n_new = 0;
        char olds[2048] = "", news[2048] = "", kept[8400];
        for (int j = 0, a = 0, b = 0; j <= i && stuck; j++) {
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
        snprintf(kept, sizeof kept, "%s/.shardtrain-old-%ld", s->out, (long)getpid());
        if (n_old && rename(old, kept) != 0) {
            snprintf(kept, sizeof kept, "%s", old);
            keep_stage = 1;
        }
        char why[12800] = "";
        if (n_old)
            snprintf(why, sizeof why, "%d replaced file%s could not be put back; the old "
                     "copies are in %s (%s)", n_old, n_old > 1 ? "s" : "", kept, olds);
        if (n_new)
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%d new file%s could "
                     "not be removed (%s)", n_old ? "; " : "", n_new, n_new > 1 ? "s" : "",
                     news);
        if (stuck)
            st_error(to, "cannot move the new file into place: %s; hint: %s", strerror(e),
                     why);
        else
            st_error(to, "cannot move the new file into place: %s; hint: %s is as it was; "
                     "check free space and permissions", strerror(e), s->out);
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
