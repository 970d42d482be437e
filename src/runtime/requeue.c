/* The Slurm requeue (see requeue.h).
 *
 * `scontrol requeue` exits 1 both when the job cannot be requeued and when
 * it already is: a job that Slurm itself requeued (an administrator's
 * `scontrol requeue`, a preemption with PreemptMode=REQUEUE) gets SIGTERM,
 * shardtrain checkpoints and asks again, and slurmctld answers "Job is
 * pending execution for job N" although the job will run again.  So a
 * failed requeue is not the verdict: the job's record (`scontrol show job
 * -o`) is.  A job requeued since this run started shows more Restarts than
 * the SLURM_RESTART_COUNT this run was given, or a pending state.
 *
 * The requeue also makes slurmstepd signal every process of the step,
 * scontrol included, so the children start with SIGTERM blocked (a
 * blocked signal stays blocked across exec): otherwise the requeue's own
 * SIGTERM can kill the scontrol that asked for it before it reports.
 * SIGUSR1 and SIGUSR2 are blocked for the same reason: `scancel --signal
 * --full` reaches the tasks once from slurmstepd and once more through
 * srun, which forwards what the batch step got, and a second SIGUSR1 that
 * lands while scontrol runs would kill it (seen in the test cluster as a
 * requeue that "failed" without a word).  A child that dies of a signal all
 * the same is reported as such. */
#include "runtime/requeue.h"
#include "base/log.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* What one scontrol run said: its exit status (-1: did not run or was
 * killed) and its output, stdout and stderr together. */
typedef struct {
    int status;
    char out[4096];
} scontrol_run;

static void run_scontrol(scontrol_run *run, char *const argv[])
{
    run->status = -1;
    run->out[0] = '\0';
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(run->out, sizeof run->out, "cannot make a pipe: %s", strerror(errno));
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGUSR1);
    sigaddset(&blocked, SIGUSR2);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&fa, fd[1]);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &blocked);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    /* argv, not a shell string: the job id is never parsed by a shell. */
    int err = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(fd[1]);
    if (err) {
        close(fd[0]);
        snprintf(run->out, sizeof run->out, "cannot run %s: %s", argv[0], strerror(err));
        return;
    }
    size_t len = 0;
    for (;;) {
        char sink[512];
        char *to = len + 1 < sizeof run->out ? run->out + len : sink;
        size_t room = len + 1 < sizeof run->out ? sizeof run->out - 1 - len : sizeof sink;
        ssize_t n = read(fd[0], to, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (to != sink)
            len += (size_t)n;
    }
    run->out[len] = '\0';
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    run->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (WIFSIGNALED(status) && len + 48 < sizeof run->out)
        len += (size_t)snprintf(run->out + len, sizeof run->out - len, "%s(%s killed by signal %d)",
                                len ? " " : "", argv[0], WTERMSIG(status));
    /* Quoted as one line: trailing newlines go, inner ones become spaces. */
    while (len > 0 && (run->out[len - 1] == '\n' || run->out[len - 1] == ' '))
        run->out[--len] = '\0';
    for (char *p = run->out; (p = strchr(p, '\n'));)
        *p = ' ';
}

/* The value of KEY= in scontrol's one-line record, into val; 0 if absent. */
static int record_field(const char *record, const char *key, char *val, size_t size)
{
    size_t k = strlen(key);
    for (const char *p = record; (p = strstr(p, key)); p += k) {
        if ((p != record && p[-1] != ' ') || p[k] != '=')
            continue;
        const char *v = p + k + 1;
        size_t n = strcspn(v, " ");
        if (n >= size)
            n = size - 1;
        memcpy(val, v, n);
        val[n] = '\0';
        return 1;
    }
    return 0;
}

/* Whether the job's record shows it requeued since this run started. */
static int record_says_requeued(const char *state, const char *restarts)
{
    const char *mine = getenv("SLURM_RESTART_COUNT");
    long before = mine && *mine ? strtol(mine, NULL, 10) : 0;
    if (*restarts && strtol(restarts, NULL, 10) > before)
        return 1;
    return !strcmp(state, "PENDING") || !strncmp(state, "REQUEUE", 7);
}

void st_slurm_requeue(void)
{
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job)
        return;
    scontrol_run req, show;
    char *requeue_argv[] = {"scontrol", "requeue", (char *)job, NULL};
    run_scontrol(&req, requeue_argv);
    if (req.status == 0) {
        st_info("shardtrain: requeued Slurm job %s", job);
        return;
    }
    const char *said = req.out[0] ? req.out : "no message";
    char *show_argv[] = {"scontrol", "show", "job", "-o", (char *)job, NULL};
    run_scontrol(&show, show_argv);
    char state[64] = "", restarts[32] = "", requeue[16] = "";
    if (show.status != 0 || !record_field(show.out, "JobState", state, sizeof state)) {
        /* Slurm knows no such job (a stale SLURM_JOB_ID) or cannot be
         * asked: nothing will run this job again. */
        st_warn("scontrol requeue %s failed: '%s'; the job is not requeued (scontrol show "
                "job %s: '%s'); hint: resubmit it, checkpoint.resume = auto resumes from "
                "the checkpoint", job, said, job, show.out[0] ? show.out : "no message");
        return;
    }
    record_field(show.out, "Restarts", restarts, sizeof restarts);
    record_field(show.out, "Requeue", requeue, sizeof requeue);
    if (record_says_requeued(state, restarts)) {
        st_info("shardtrain: Slurm job %s is requeued (JobState=%s Restarts=%s)", job, state,
                restarts[0] ? restarts : "?");
        return;
    }
    st_warn("scontrol requeue %s failed: '%s'; the job is not requeued (JobState=%s "
            "Restarts=%s Requeue=%s); hint: %s", job, said, state, restarts[0] ? restarts : "?",
            requeue[0] ? requeue : "?",
            !strcmp(requeue, "0") ? "submit with sbatch --requeue (and JobRequeue allowed in "
                                    "slurm.conf); resubmit this one, checkpoint.resume = auto "
                                    "resumes from the checkpoint"
                                  : "resubmit the job; checkpoint.resume = auto resumes from "
                                    "the checkpoint");
}
