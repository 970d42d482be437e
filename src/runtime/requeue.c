/* The Slurm requeue (see requeue.h). */
#include "runtime/requeue.h"
#include "base/log.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

void st_slurm_requeue(void)
{
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job)
        return;
    /* argv, not a shell string: the job id is never parsed by a shell. */
    char *argv[] = {"scontrol", "requeue", (char *)job, NULL};
    pid_t pid;
    int err = posix_spawnp(&pid, "scontrol", NULL, NULL, argv, environ);
    if (err) {
        st_warn("cannot run scontrol requeue %s: %s; the job is not requeued", job,
                strerror(err));
        return;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        st_warn("scontrol requeue %s failed (status %d); the job is not requeued", job,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    else
        st_info("shardtrain: requeued Slurm job %s", job);
}
