/* The FSDP engine as the configuration asks for it: the engine's options
 * decided from st_config, and the initial weights (random from the seed,
 * or model.init's files) loaded into the fresh shards.  The engine itself
 * reads no configuration and opens no files (engine/fsdp.h); this is the
 * one place that translates for it, shared by train, sample and the tests
 * that drive the engine. */
#ifndef ST_ENGINE_SETUP_H
#define ST_ENGINE_SETUP_H

#include "comm/groups.h"
#include "config/config.h"
#include "engine/fsdp.h"
#include "kernels/kernels.h"
#include "model/model.h"

/* The engine's options for cfg. */
void st_fsdp_options_from_config(const st_config *cfg, st_fsdp_options *opt);

/* st_fsdp_create with cfg's options, then this rank's slices of the
 * initial weights (cfg->model.init, cfg->train.seed).  Returns an exit
 * status (a weights file that cannot be used is reported). */
int st_engine_open(st_fsdp *f, const st_model *m, const st_config *cfg, st_groups *groups,
                   st_kernels *k);

#endif
