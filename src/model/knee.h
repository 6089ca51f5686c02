/* knee.h — the one definition of the knee, for every client: stoke tune's
** sweep (src/tune/tune.c, search.c), the doctor's advice
** (src/diagnose/advise.c) and the online autotuner.  The public half is
** stoke_tune_knee_find (stoke.h); this header adds the model's side, so
** that a knee predicted from one run and a knee measured by a sweep are
** chosen by the same rule with the same tolerance (STOKE_TUNE_TOLERANCE)
** and cannot contradict each other.  Library-internal. */
#ifndef STOKE_MODEL_KNEE_H
#define STOKE_MODEL_KNEE_H

#include "model/model.h"

/* A tune point from the model's prediction of (workers, prefetch): the
** throughput B / step, the verdict busy when the predicted wait is under
** STOKE_BUSY_WAIT_RATIO (else starving; the verdict's own threshold),
** status MEASURED so that stoke_tune_knee_find weighs it like a measured
** one, host_bytes as given, predicted_samples_per_s = samples_per_s.
** Returns 0 or STOKE_EINVAL. */
int stoke__tune_predicted_point(const stoke_model *m, unsigned workers,
                                unsigned prefetch, uint64_t host_bytes,
                                stoke_tune_point *out);

/* stoke_tune_knee_model (public, stoke.h): the knee of model m over W in
** [w_lo, w_hi] at prefetch k, to one worker:
** stoke_tune_knee_find(tolerance, have_consumer = a step was measured) on
** the model's predicted points.  The model is evaluated on a coarse ladder
** (1, 2, 3, 4, 6, 8, 12, ...) and then at every W between the coarse
** knee and the rung below it.  *out gets the knee's predicted point (its
** n_workers the knee); *knee_out (may be NULL) the knee_find result's
** stall_removed and reason (its indexes are into an internal table).
** Returns 0 or STOKE_EINVAL (w_lo > w_hi, a bad model).  It lives in
** knee.c with stoke_tune_knee_find, the one rule both apply. */

/* The knee rule itself (steps 1-3 of knee.c's DESIGN) over the points
** eligible() accepts, the cheapest by cheaper(a, b) ("a is cheaper than
** b"): out->index, out->best and out->stall_removed set, out->reason left
** empty for the caller's own words.  stoke_tune_knee_find (fewest
** workers) and stoke_tune_io_knee_find (fewest requests in flight,
** src/tune/io_sweep.c) are this with their own cost.  Returns 0, or
** STOKE_EINVAL (NULL, a tolerance outside [0, 1), or no eligible measured
** point: "tune: <none>"). */
typedef bool (*stoke__knee_eligible)(const stoke_tune_point *p);
typedef bool (*stoke__knee_cheaper)(const stoke_tune_point *a,
                                    const stoke_tune_point *b);
int stoke__knee_pick(const stoke_tune_point *pts, size_t n, double tolerance,
                     int have_consumer, stoke__knee_eligible eligible,
                     stoke__knee_cheaper cheaper, const char *none,
                     stoke_tune_knee *out);
/* The knee's throughput in percent of the best's (100 when the best is
** 0), for the reasons' words. */
double stoke__knee_share(const stoke_tune_point *pts,
                         const stoke_tune_knee *k);

#endif
