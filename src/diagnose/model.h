/* model.h — the queue model's helpers shared by model.c, diagnose.c and
** advise.c (src/diagnose/ only). */
#ifndef STOKE_DIAGNOSE_MODEL_H
#define STOKE_DIAGNOSE_MODEL_H

#include "stoke.h"

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
