/* Small filesystem helpers shared by the train loop, checkpoints and
 * logging. */
#ifndef ST_PATHS_H
#define ST_PATHS_H

/* mkdir -p.  Returns 0, or prints an error naming the path and returns
 * ST_EXIT_FAILURE. */
int st_mkdir_p(const char *path);

#endif
