/* Slurm requeue: after a preemption checkpoint, putting the job back in
 * the queue so that it resumes from that checkpoint without a person
 * resubmitting it. */
#ifndef ST_REQUEUE_H
#define ST_REQUEUE_H

/* Under Slurm (SLURM_JOB_ID set), runs `scontrol requeue JOB` and waits
 * for it; elsewhere does nothing.  Prints that the job is requeued, also
 * when scontrol failed because it already was (the job's record decides),
 * or a warning quoting scontrol when it is not: the checkpoint is written
 * either way.  Call on one rank only. */
void st_slurm_requeue(void);

#endif
