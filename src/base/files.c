/* Filesystem helpers (see paths.h). */
#include "base/files.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int st_mkdir_p(const char *path)
{
    char buf[4096];
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
