/* Unit tests of report/: the ETA's count of the evaluations and
 * checkpoints still to come, and what a resumed segment carries from the
 * summary.json the previous one left (and what it must not carry).  The
 * expected values are worked out by hand from the rules in runlog.h and
 * summary.h. */
#include "base/log.h"
#include "report/runlog.h"
#include "report/summary.h"
#include "tap.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b));
}

static void test_eta(void)
{
    /* 50 of 100 steps at 1 s; evaluations at 60, 80, 100 (every 20); checkpoints at 75
     * and 100 (every 25). */
    double eta = st_eta_seconds(50, 100, 1.0, 20, 2.0, 25, 5.0);
    tap_ok(near(eta, 50.0 + 3 * 2.0 + 2 * 5.0), "eta: 50 steps + 3 evaluations + 2 checkpoints "
           "(%g s)", eta);
    /* 100 not a multiple of 30: evaluations at 60, 90 and the last step. */
    eta = st_eta_seconds(50, 100, 1.0, 30, 2.0, 0, 5.0);
    tap_ok(near(eta, 50.0 + 3 * 2.0), "eta: the last step evaluates too; interval 0 = none (%g s)",
           eta);
    eta = st_eta_seconds(60, 100, 1.0, 20, 2.0, 0, 0.0);
    tap_ok(near(eta, 40.0 + 2 * 2.0), "eta: an evaluation at the current step is done (%g s)",
           eta);
    tap_ok(st_eta_seconds(100, 100, 1.0, 20, 2.0, 25, 5.0) == 0.0, "eta: 0 when done");
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        st_die(1, "%s: cannot write", path);
}

static const char *prev_summary =
    "{\"status\": \"running\", \"exit_status\": 0, \"steps_done\": 12, \"segments\": 1,"
    " \"wall_time_s\": 100.0, \"time_lost_s\": {\"checkpoints\": 4.0, \"evaluation\": 6.0,"
    " \"restarts\": 1.0}, \"train_time_s\": 60.0, \"train_tokens\": 12000,"
    " \"mean_step_s\": 5.0, \"val_loss\": {\"best\": 2.5, \"best_step\": 8, \"final\": 2.7,"
    " \"final_step\": 12}, \"last_checkpoint\": \"ck/step_00000010\"}\n";

static void test_carry(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    write_file(path, prev_summary);

    st_run_summary s;
    st_summary_begin(&s, path, 10, 50);
    tap_ok(s.segments == 2, "carry: the resumed segment is the second (%d)", s.segments);
    tap_ok(near(s.wall_s, 100.0) && near(s.ckpt_s, 4.0) && near(s.eval_s, 6.0),
           "carry: wall, checkpoint and evaluation times");
    /* Steps 11 and 12 are done again: 2 x 5 s lost, on top of the 1 s before. */
    tap_ok(near(s.restart_s, 1.0 + 2 * 5.0), "carry: redone steps count as lost to the restart "
           "(%g s)", s.restart_s);
    tap_ok(near(s.train_s, 60.0) && s.train_tokens == 12000, "carry: training time and tokens");
    tap_ok(s.have_val && near(s.best_val, 2.5) && s.best_val_step == 8,
           "carry: the best val_loss from before the checkpoint");
    tap_ok(near(s.final_val, 2.5) && s.final_val_step == 8,
           "carry: not a val_loss logged after the checkpoint (step 12 > 10)");
    tap_ok(!strcmp(s.last_ckpt, "ck/step_00000010"), "carry: the last checkpoint");
    tap_ok(s.steps_done == 10 && s.steps_total == 50, "carry: steps done start at the resume");

    st_summary_begin(&s, path, 20, 50);
    tap_ok(s.segments == 1 && s.wall_s == 0.0 && !s.have_val && !s.last_ckpt[0],
           "carry: a summary of fewer steps than the checkpoint is another run's: not carried");
    st_summary_begin(&s, path, 0, 50);
    tap_ok(s.segments == 1 && s.wall_s == 0.0, "carry: nothing when starting fresh");
    write_file(path, "{\"steps_done\": 12, \"segments\": \"x\", \"wall_time_s\": -3,"
                     " \"time_lost_s\": 7}\n");
    st_summary_begin(&s, path, 10, 50);
    tap_ok(s.segments == 2 && s.wall_s == 0.0 && s.ckpt_s == 0.0 && s.restart_s == 0.0,
           "carry: malformed fields count as nothing, never fail the resume");
    write_file(path, "not json");
    st_summary_begin(&s, path, 10, 50);
    tap_ok(s.segments == 1, "carry: an unreadable summary is ignored");
}

static void test_write_unknowns(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/out.json", dir);
    st_run_summary s;
    st_summary_begin(&s, path, 0, 5); /* no steps: every rate unknown */
    int rc = st_summary_write(&s, path, "failed", 4, 0);
    json_error_t err;
    json_t *o = rc ? NULL : json_load_file(path, 0, &err);
    tap_ok(o != NULL, "write: a summary with unknown rates is valid JSON");
    tap_ok(o && json_is_null(json_object_get(json_object_get(o, "tokens_per_s"), "mean")) &&
               json_is_null(json_object_get(json_object_get(o, "mfu"), "final")) &&
               json_is_null(json_object_get(o, "last_checkpoint")) &&
               json_is_null(json_object_get(o, "val_loss")),
           "write: unknown values are null, never NaN");
    tap_ok(o && !strcmp(json_string_value(json_object_get(o, "status")), "failed") &&
               json_integer_value(json_object_get(o, "exit_status")) == 4,
           "write: status and exit status");
    json_decref(o);
    tap_ok(!strcmp(st_summary_status(0), "completed") && !strcmp(st_summary_status(3), "preempted")
               && !strcmp(st_summary_status(4), "failed") && !strcmp(st_summary_status(2), "failed"),
           "status names of exit statuses");
}

int main(void)
{
    char dir[] = "/tmp/st-report-XXXXXX";
    if (!mkdtemp(dir))
        st_die(1, "mkdtemp failed");
    test_eta();
    test_carry(dir);
    test_write_unknowns(dir);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
