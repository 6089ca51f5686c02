/* quarantine_feature.c — the quarantine as a loader feature
** (cfg.quarantine_path).
**
** The quarantine (src/source/quarantine.c) lists samples known to be bad.
** As a feature it is an entry of the fill chain, asked before any other
** (the RAM cache included): a sample it lists is not read, and the
** bad-sample policies handle it at once.  Its state is the open
** quarantine; it has its own leaf lock.  A loader without a quarantine
** does not list it, so no sample asks it. */
#include "pipeline.h"

static void destroy(stoke_loader *l, void *state) {
  stoke__quarantine_close(state);
  l->cfg.quarantine_path = NULL;
}

static bool fill_known_bad(const stoke_loader *l, const void *state,
                           size_t index) {
  (void)l;
  return stoke__quarantine_has(state, index);
}

static const stoke__feature_ops quarantine_feature = {
    .name = "quarantine",
    .destroy = destroy,
    .fill_known_bad = fill_known_bad,
};

int stoke__quarantine_create(stoke_loader *l) {
  if (!l->cfg.quarantine_path) return 0;
  char err[STOKE__ERRMSG_CAP];
  stoke__quarantine *q = NULL;
  int rc = stoke__quarantine_open(l->cfg.quarantine_path, l->src,
                                  stoke__loader_fingerprint(l),
                                  STOKE__QUARANTINE_APPEND,
                                  l->alloc, &q, err, sizeof err);
  if (rc != 0) return stoke__set_tls_error(rc, "loader: %s", err);
  stoke__feature_add(&l->features, &quarantine_feature, q);
  /* The caller's string need not outlive create: point at our copy. */
  l->cfg.quarantine_path = stoke__quarantine_path(q);
  return 0;
}

stoke__quarantine *stoke__quarantine_of(const stoke_loader *l) {
  return stoke__feature_state(&l->features, &quarantine_feature);
}
