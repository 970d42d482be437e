/* Small filesystem helpers shared by the train loop, checkpoints, data
 * shards and weight files: creating directories, writing every byte, and
 * the one way shardtrain replaces a file so that a reader or a crash never
 * sees half of it. */
#ifndef ST_FILES_H
#define ST_FILES_H

#include <stdio.h>

#include <stddef.h>

/* mkdir -p.  Returns 0, or prints an error naming the path and returns
 * ST_EXIT_FAILURE. */
int st_mkdir_p(const char *path);

/* Make dir (mkdir -p) and check that a file can be created in it, quietly:
 * 0, or the errno that says why not, for the caller's message. */
int st_dir_writable(const char *dir);

/* Open path for reading without blocking and only if it is a regular file
 * (a FIFO in its place would otherwise hang the open).  Returns the
 * descriptor, or -1 with errno (EINVAL: not a regular file). */
int st_open_regular(const char *path);
/* The same for callers whose messages tell the two failures apart: the
 * descriptor with *sb filled; ST_OPEN_FAILED (-1, errno set) when open or
 * fstat fails; ST_OPEN_NOT_REGULAR (-2, nothing left open, *sb says what
 * the path is) when it is a directory, FIFO, socket or device. */
#define ST_OPEN_FAILED (-1)
#define ST_OPEN_NOT_REGULAR (-2)
struct stat;
int st_open_regular_stat(const char *path, struct stat *sb);
/* st_open_regular as a stdio stream ("rb"), or NULL with errno. */
FILE *st_fopen_regular(const char *path);

/* write(2) all n bytes, retrying when interrupted.  0, or -1 with errno
 * set. */
int st_write_all(int fd, const void *buf, size_t n);

/* fsync a directory, making the renames and creations in it durable
 * (st_fsync_parent: the directory holding path).  0, or -1 with errno
 * set; a file system that refuses fsync on directories counts as done. */
int st_fsync_dir(const char *dir);
int st_fsync_parent(const char *path);

/* Writes a file's bytes to fd: 0, or -1 with errno set. */
typedef int (*st_file_writer)(int fd, void *ctx);
/* The st_file_writer of a whole file that is one NUL-terminated string
 * (ctx): writes its bytes. */
int st_file_write_string(int fd, void *ctx);

/* Refuses path as the name of a file about to be written when something
 * other than a file or a symbolic link is there.  Writing goes through a
 * temporary renamed over path, which would replace a FIFO or a device
 * with a regular file (as root, `-o /dev/null` destroyed /dev/null), and
 * cannot replace a directory.  One error line naming path and
 * ST_EXIT_USAGE; 0 for a file, a symbolic link (the rename replaces the
 * link, never its target) or nothing there.  Every writer of a path a
 * user names calls it first, before any work where it can. */
int st_refuse_special(const char *path);

/* 1 when a FIFO, socket or device is at path (not followed: a link is not
 * one), else 0: what no writer of ours makes, for a caller to whom a
 * directory there is legitimate (a checkpoint's step directory). */
int st_is_special(const char *path);

/* Where st_file_write_atomic stopped; errno says why. */
enum st_atomic_step {
    ST_ATOMIC_DONE = 0,
    ST_ATOMIC_CREATE,     /* the temporary could not be created */
    ST_ATOMIC_WRITE,      /* writing, syncing or closing the temporary failed */
    ST_ATOMIC_RENAME,     /* the temporary could not be renamed over path */
    ST_ATOMIC_SYNC_DIR,   /* path is in place, but its directory could not be synced */
};

/* Replace path with what writer(fd, ctx) produces, all or nothing: the bytes
 * go to tmp (a name in path's directory, created with permissions mode
 * less the umask), which is fsynced, renamed over path, and then the
 * directory is fsynced.  On a failure before the rename tmp is removed.
 * Nothing is written where path or tmp is not a file (ST_ATOMIC_CREATE
 * with errno EEXIST): callers refuse path first with st_refuse_special,
 * which words the error; this keeps a forgotten check from replacing a
 * device, and a FIFO at tmp from blocking the open.
 * Prints nothing, since each kind of file words its errors for its user;
 * returns an enum st_atomic_step. */
int st_file_write_atomic(const char *path, const char *tmp, unsigned mode,
                         st_file_writer writer, void *ctx);

#endif
