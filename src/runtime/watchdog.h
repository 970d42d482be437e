/* The collective watchdog: waits on MPI collectives with a deadline.
 *
 * A rank that dies or stalls (killed, SIGSTOPped, a hung device) leaves the
 * others blocked in their next collective for ever; with Slurm's default
 * (KillOnBadExit=0) or mpirun --enable-recovery nothing tears the job down
 * until its time limit.  Every wait of the mpi communication backend, of
 * the world collectives of start-up, of the status agreements and of the
 * checkpoint gather goes through st_watchdog_wait instead,
 * which polls with the deadline parallel.timeout_s.  On expiry (or an MPI
 * error) each surviving rank prints one line naming the collective, the
 * step and the ranks that did not answer (only those: a rank that answers
 * is alive, even if it is blocked elsewhere), then the job stops with exit
 * status ST_EXIT_TIMEOUT.  Blocking MPI calls that cannot be polled
 * (communicator creation) are fenced and bounded by deadline.h.
 *
 * Only the mpi backend and this file know about MPI; the engine describes
 * an operation in words (st_wd_op, filled by comm_mpi.c from comm.h's
 * st_comm_desc), and the watchdog formats them only when something went
 * wrong.  Communicators are registered in the same order on every rank, so
 * a registration index names the same communicator on all its members. */
#ifndef ST_WATCHDOG_H
#define ST_WATCHDOG_H

#include <mpi.h>
#include <stdint.h>

/* What a wait is for, in words, for the error line:
 *   "<op> of <what> <unit> (<group> group) at step <step>" */
typedef struct {
    const char *op;      /* "all_gather", "reduce_scatter", "all_reduce" */
    const char *what;    /* what travels: "unit", "the loss"; NULL: nothing named */
    int unit;            /* >= 0: printed after what */
    const char *group;   /* the communicator's label: "world", "shard", ... */
    int64_t step;        /* training step (1-based); 0: start-up; < 0: shutdown */
} st_wd_op;

/* After MPI_Init, on every rank (a collective over MPI_COMM_WORLD): makes
 * MPI errors return instead of aborting, builds the private side channel
 * and registers MPI_COMM_WORLD as id 0.  Returns an exit status. */
int st_watchdog_init(void);
/* Before MPI_Finalize; safe when init did not run. */
void st_watchdog_finalize(void);
int st_watchdog_running(void);

/* parallel.timeout_s; the schema's default holds until it is set. */
void st_watchdog_set_timeout(double seconds);

/* The training step under way (0 before the first), for the messages of
 * collectives whose callers do not know it (the world status agreement). */
void st_watchdog_set_step(int64_t step);
int64_t st_watchdog_step(void);

/* Watch collectives on comm (not owned; sets MPI_ERRORS_RETURN on it).
 * Returns its id, or -1 when the watchdog is not running (waits are then
 * plain MPI_Wait). */
int st_watchdog_register(MPI_Comm comm);
void st_watchdog_unregister(int id);

/* Counts a collective about to start on id; returns its sequence number.
 * A local increment: nothing is sent. */
uint64_t st_watchdog_enter(int id);

/* Completes *req (the collective numbered seq on id).  Returns only on
 * success: a timeout or an MPI error reports and ends the process. */
void st_watchdog_wait(MPI_Request *req, int id, uint64_t seq, const st_wd_op *op);

/* The id of MPI_COMM_WORLD, registered by st_watchdog_init. */
#define ST_WD_WORLD 0

/* For direct MPI calls: completes a non-blocking collective numbered seq
 * on id that its MPI_I... call started with result mpi_rc. */
void st_watchdog_finish(int mpi_rc, MPI_Request *req, int id, uint64_t seq,
                        const st_wd_op *op);

/* Brackets an MPI call that blocks and cannot be polled (communicator
 * creation: MPI_Comm_split, MPI_Comm_dup).  With world_fence, every rank of
 * MPI_COMM_WORLD calls it at the same point: a watched barrier first, so
 * a rank that is already gone is named as usual.  Then the process
 * deadline (deadline.h) bounds the call by parallel.timeout_s; it ends
 * this rank with ST_EXIT_TIMEOUT and a line naming `what`, but cannot
 * name the missing rank. */
void st_watchdog_blocking_begin(const char *what, int world_fence);
void st_watchdog_blocking_end(void);

/* Reports that the collective could not even start (MPI error mpi_rc) and
 * ends the process the same way. */
void st_watchdog_fail(int id, uint64_t seq, const st_wd_op *op, int mpi_rc)
    __attribute__((noreturn));

#endif
