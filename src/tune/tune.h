/* tune.h — the tuner's internals shared by tune.c (the grid, one point's
** measurement, the knee) and search.c (the adaptive sweep); the knee and
** the queue model they use are src/model/'s.  src/tune/ and the tests
** only. */
#ifndef STOKE_TUNE_TUNE_H
#define STOKE_TUNE_TUNE_H

#include "model/knee.h"
#include "os/os.h"

/* What the adaptive search asks of the world: measure one point.  The
** sweep's is a loader run (tune.c); the tests give curves of their own, so
** that the search's rules are checked without a clock. */
typedef struct stoke__tune_oracle {
  /* Measure p (PENDING, with its workers, prefetch, batch size and
  ** host_bytes set): fill its MEASURED fields and status, and *m with the
  ** run's queue model (*have_model = 1) when one could be made.  Returns 0
  ** or a STOKE_E* code with the thread's message set. */
  int (*measure)(void *user, const stoke_tune_config *c, stoke_tune_point *p,
                 stoke_model *m, int *have_model);
  void *user;
} stoke__tune_oracle;

/* The adaptive sweep (stoke_tune_config.adaptive, docs/tuning.md) over
** oracle o: points recorded into pts[0..cap) in the order decided, *n_done
** of them.  Returns 0 (also when stopped early) or the oracle's error. */
int stoke__tune_search(const stoke_tune_config *c,
                       const stoke__tune_oracle *o, stoke_tune_point *pts,
                       size_t cap, size_t *n_done);
/* The most points stoke__tune_search can record for c. */
size_t stoke__tune_search_bound(const stoke_tune_config *c);
/* The adaptive sweep's top: max_workers, else STOKE_TUNE_MAX_WORKERS. */
unsigned stoke__tune_top(const stoke_tune_config *c);

/* The real oracle: one loader per point (tune.c). */
extern const stoke__tune_oracle stoke__tune_loader_oracle;

/* The knee's tolerance of c (STOKE_TUNE_TOLERANCE when unset). */
double stoke__tune_tolerance(const stoke_tune_config *c);

#endif
