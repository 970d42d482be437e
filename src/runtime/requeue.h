/* Slurm requeue: after a preemption checkpoint, putting the job back in
 * the queue so that it resumes from that checkpoint without a person
 * resubmitting it. */
#ifndef ST_REQUEUE_H
#define ST_REQUEUE_H

/* Under Slurm (SLURM_JOB_ID set), runs `scontrol requeue JOB` and waits
 * for it; elsewhere does nothing.  A failure is a warning: the checkpoint
 * is written either way.  Call on one rank only. */
void st_slurm_requeue(void);

#endif
