/* feature.c — the list of the loader's features and the core's calls to
** their hooks (feature.h). */
#include "pipeline/feature.h"

void stoke__feature_add(stoke__features *fs, const stoke__feature_ops *ops,
                        void *state) {
  /* The list has room for every feature: a full list is a new feature
  ** that forgot to raise STOKE__MAX_FEATURES. */
  if (fs->n >= STOKE__MAX_FEATURES) return;
  fs->f[fs->n].ops = ops;
  fs->f[fs->n].state = state;
  fs->n++;
  if (ops->fill_known_bad || ops->fill_get || ops->fill_put)
    fs->fills = true;
}

void *stoke__feature_state(const stoke__features *fs,
                           const stoke__feature_ops *ops) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops == ops) return fs->f[i].state;
  return NULL;
}

bool stoke__features_may_claim(const stoke__features *fs,
                               const stoke_loader *l) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->may_claim &&
        !fs->f[i].ops->may_claim(l, fs->f[i].state))
      return false;
  return true;
}

void stoke__features_freed(const stoke__features *fs, stoke_loader *l) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->freed) fs->f[i].ops->freed(l, fs->f[i].state);
}

void stoke__features_compute(const stoke__features *fs, stoke_loader *l,
                             int64_t compute_ns) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->compute)
      fs->f[i].ops->compute(l, fs->f[i].state, compute_ns);
}

void stoke__features_step(const stoke__features *fs, stoke_loader *l,
                          int64_t wait_ns, bool empty) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->step)
      fs->f[i].ops->step(l, fs->f[i].state, wait_ns, empty);
}

void stoke__features_epoch_start(const stoke__features *fs,
                                  stoke_loader *l) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->epoch_start)
      fs->f[i].ops->epoch_start(l, fs->f[i].state);
}

void stoke__features_epoch_end(const stoke__features *fs, stoke_loader *l) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->epoch_end) fs->f[i].ops->epoch_end(l, fs->f[i].state);
}

void stoke__features_stats(const stoke__features *fs, const stoke_loader *l,
                           stoke_stats *st) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->stats) fs->f[i].ops->stats(l, fs->f[i].state, st);
}

void stoke__features_stop(const stoke__features *fs, stoke_loader *l) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->stop) fs->f[i].ops->stop(l, fs->f[i].state);
}

void stoke__features_delivered(const stoke__features *fs, stoke_loader *l,
                               const stoke_batch *b) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->delivered) fs->f[i].ops->delivered(l, fs->f[i].state, b);
}

void stoke__features_started(const stoke__features *fs, stoke_loader *l) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->started) fs->f[i].ops->started(l, fs->f[i].state);
}

void stoke__features_assigned(const stoke__features *fs, stoke_loader *l,
                              stoke__worker *w, stoke_batch *b) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->assigned) fs->f[i].ops->assigned(l, fs->f[i].state, w, b);
}

void stoke__features_chunk(const stoke__features *fs, stoke_loader *l,
                           stoke__worker *w) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->chunk) fs->f[i].ops->chunk(l, fs->f[i].state, w);
}

bool stoke__features_fill_known_bad(const stoke__features *fs,
                                    const stoke_loader *l, size_t index) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->fill_known_bad &&
        fs->f[i].ops->fill_known_bad(l, fs->f[i].state, index))
      return true;
  return false;
}

bool stoke__features_fill_get(const stoke__features *fs,
                              const stoke_loader *l, stoke_sample *s,
                              stoke__producer_stats *ps) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->fill_get &&
        fs->f[i].ops->fill_get(l, fs->f[i].state, s, ps))
      return true;
  return false;
}

void stoke__features_fill_put(const stoke__features *fs,
                              const stoke_loader *l, const stoke_sample *s) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->fill_put) fs->f[i].ops->fill_put(l, fs->f[i].state, s);
}

bool stoke__features_fill_failed(const stoke__features *fs, stoke_loader *l,
                                 stoke__worker *w, stoke_batch *b, size_t pos,
                                 size_t index, bool known_bad, bool timed,
                                 int *rc) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->fill_failed) {
      *rc = fs->f[i].ops->fill_failed(l, fs->f[i].state, w, b, pos, index,
                                      known_bad, timed);
      return true;
    }
  return false;
}

void stoke__features_filled(const stoke__features *fs, stoke_loader *l,
                            stoke_batch *b) {
  for (unsigned i = 0; i < fs->n; i++)
    if (fs->f[i].ops->filled) fs->f[i].ops->filled(l, fs->f[i].state, b);
}

void stoke__features_destroy(stoke__features *fs, stoke_loader *l) {
  while (fs->n > 0) {
    stoke__feature *f = &fs->f[--fs->n];
    if (f->ops->destroy) f->ops->destroy(l, f->state);
  }
  fs->fills = false;
}
