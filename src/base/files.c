/* Filesystem helpers (see files.h). */
#include "base/files.h"
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p without a message: 0, or errno with *at the prefix that
 * failed (a copy the caller frees, NULL when none was made). */
static int mkdir_p_quiet(const char *path, char **at)
{
    *at = NULL;
    if (!*path)
        return ENOENT;
    char *buf = strdup(path);
    if (!buf)
        return ENOMEM;
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                *at = buf;
                return errno;
            }
            *p = c;
            if (c == '\0')
                break;
        }
    }
    free(buf);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return errno;
    return S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
}

int st_mkdir_p(const char *path)
{
    char *at;
    int e = mkdir_p_quiet(path, &at);
    if (e)
        st_error(at ? at : path, "cannot create directory: %s", strerror(e));
    free(at);
    return e ? ST_EXIT_FAILURE : 0;
}

int st_dir_ready(const char *path)
{
    char *at;
    int e = mkdir_p_quiet(path, &at);
    free(at);
    if (e)
        return e;
    /* access(W_OK) answers for the real user and not for a read-only
     * mount's or an ACL's every case: a file made and removed does. */
    char *probe;
    if (asprintf(&probe, "%s/.shardtrain-probe-%ld", path, (long)getpid()) < 0)
        return ENOMEM;
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    e = fd < 0 ? errno : 0;
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    free(probe);
    return e;
}

int st_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int st_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    /* Some file systems refuse fsync on directories; nothing to do. */
    if (rc != 0 && (errno == EINVAL || errno == EBADF))
        rc = 0;
    if (close(fd) != 0)
        rc = -1;
    return rc;
}

int st_fsync_parent(const char *path)
{
    char *dir = strdup(path);
    if (!dir)
        return -1;
    char *slash = strrchr(dir, '/');
    const char *d = ".";
    if (slash == dir)
        d = "/";
    else if (slash) {
        *slash = '\0';
        d = dir;
    }
    int rc = st_fsync_dir(d);
    free(dir);
    return rc;
}

/* Removes tmp after a failure, keeping the failure's errno for the caller's
 * message. */
static int failed(const char *tmp, int step)
{
    int saved = errno;
    unlink(tmp);
    errno = saved;
    return step;
}

int st_file_write_atomic(const char *path, const char *tmp, unsigned mode,
                         st_file_writer writer, void *ctx)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return ST_ATOMIC_CREATE;
    /* fsync before the rename: otherwise a crash can leave path renamed
     * but empty. */
    if (writer(fd, ctx) != 0 || fsync(fd) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return failed(tmp, ST_ATOMIC_WRITE);
    }
    if (close(fd) != 0)
        return failed(tmp, ST_ATOMIC_WRITE);
    if (rename(tmp, path) != 0)
        return failed(tmp, ST_ATOMIC_RENAME);
    /* Make the rename itself durable: a crash could otherwise lose a file
     * the user was told exists. */
    return st_fsync_parent(path) != 0 ? ST_ATOMIC_SYNC_DIR : ST_ATOMIC_DONE;
}

int st_open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

FILE *st_fopen_regular(const char *path)
{
    int fd = st_open_regular(path);
    FILE *fp = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!fp && fd >= 0) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return fp;
}
