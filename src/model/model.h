/* model.h — the numbers behind every decision (src/model/): the queue
** model (model.c; stoke_model_init and stoke_predict_step are public), the
** knee (knee.h) and the online autotuner's controller
** (autotune_controller.h), used alike by the doctor (src/diagnose/), the
** tuner (src/tune/) and the live autotuner (src/pipeline/).  These are the
** queue model's helpers.  Nothing here is API. */
#ifndef STOKE_MODEL_MODEL_H
#define STOKE_MODEL_MODEL_H

#include "core/core.h"
#include "os/os.h"
#include "sampler/sampler.h"

/* Cores left to the workers: cores - consumer_cpu, at least 1. */
double stoke__model_cores_avail(const stoke_model *m);
/* The closed form: steady-state producer time per batch with `workers`
** and `prefetch`; *bound (may be NULL) gets what sets it. */
int64_t stoke__model_producer_batch(const stoke_model *m, unsigned workers,
                                    unsigned prefetch, int *bound);

/* A lower bound of the producer's time per batch at m's own W and K: the
** closed form and B * (measured t_d) / W_eff, whichever is larger; 0 with
** no workers or no producer measurements. */
int64_t stoke__model_producer_floor(const stoke_model *m);

#endif
