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

int st_mkdir_p(const char *path)
{
    char buf[4096];
    if (!*path) {
        st_error(NULL, "cannot create a directory with an empty name");
        return ST_EXIT_FAILURE;
    }
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf) {
        st_error(path, "path too long");
        return ST_EXIT_FAILURE;
    }
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                st_error(buf, "cannot create directory: %s", strerror(errno));
                return ST_EXIT_FAILURE;
            }
            *p = c;
            if (c == '\0')
                break;
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        st_error(path, "not a directory");
        return ST_EXIT_FAILURE;
    }
    return 0;
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

int st_file_write_string(int fd, void *ctx)
{
    return st_write_all(fd, ctx, strlen(ctx));
}

int st_refuse_special(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0 || S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode))
        return 0;
    st_error(path, "is %s, not a file, and a file of this name is being written "
             "here; hint: move it away, or write to another directory",
             S_ISDIR(sb.st_mode) ? "a directory" : "a special file");
    return ST_EXIT_USAGE;
}

int st_is_special(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0 && !S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode) &&
           !S_ISLNK(sb.st_mode);
}

int st_file_write_atomic(const char *path, const char *tmp, unsigned mode,
                         st_file_writer writer, void *ctx)
{
    struct stat sb;
    if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode)) {
        errno = EEXIST;
        return ST_ATOMIC_CREATE;
    }
    /* O_NONBLOCK: a FIFO left at tmp fails (ENXIO) rather than waiting
     * for a reader; it has no effect on a regular file. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK,
                  (mode_t)mode);
    if (fd < 0)
        return ST_ATOMIC_CREATE;
    /* A device at tmp would take the bytes and then be renamed over
     * path; it is someone's, so it is left where it is. */
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        errno = EEXIST;
        return ST_ATOMIC_CREATE;
    }
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

int st_open_regular_stat(const char *path, struct stat *sb)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return ST_OPEN_FAILED;
    if (fstat(fd, sb) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return ST_OPEN_FAILED;
    }
    if (!S_ISREG(sb->st_mode)) {
        close(fd);
        return ST_OPEN_NOT_REGULAR;
    }
    return fd;
}

int st_open_regular(const char *path)
{
    struct stat sb;
    int fd = st_open_regular_stat(path, &sb);
    if (fd == ST_OPEN_NOT_REGULAR) {
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

int st_dir_writable(const char *dir)
{
    char buf[4096];
    if (!*dir || (size_t)snprintf(buf, sizeof buf, "%s", dir) >= sizeof buf)
        return ENAMETOOLONG;
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return errno;
            *p = c;
            if (c == '\0')
                break;
        }
    }
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return errno;
    if (!S_ISDIR(sb.st_mode))
        return ENOTDIR;
    /* Writing a file is the only test that sees read-only mounts, ACLs
     * and quotas alike. */
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.shardtrain-probe.%ld", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno;
    close(fd);
    unlink(probe);
    return 0;
}
