/* feature.h — the loader's features, reached through one table of hooks.
**
** A feature (the live autotuner, the packing cache, ...) keeps its state
** in its own file and struct; the loader holds only a list of the features
** that are ON, each an ops table and its state.  The core calls the hooks
** of every listed feature at fixed points, as libuv's loop calls each
** handle kind at fixed phases; it never names a feature.  A feature that
** is off is not in the list, so it costs nothing: not a call, not a
** branch beyond the loop over an empty list.  The list is assembled in one
** place, stoke_loader_create (loader.c), in a fixed order; hooks run in
** that order, destroy in the reverse one.
**
** Every hook may be NULL.  Threads and locks, per hook:
**   may_claim  a worker, mu held: may a new batch take a slot now?  All
**              listed features must agree.
**   freed      any thread, mu held: a host slot went back to the pool.
**   compute    the consumer, mu held: the step before took compute_ns.
**   step       the consumer, mu not held: next() handed out a step after
**              waiting wait_ns; `empty`: no batch was ready when it asked.
**   epoch_start  the consumer, mu held: epoch l->epoch starts, its order
**              set up, delivery from batch 0 (a feature may move it).
**   epoch_end  the consumer, mu not held: the epoch's END was returned or
**              end_epoch() ran.
**   stats      any thread, no lock held: fill the feature's fields of
**              stoke_stats (it takes the locks it needs).
**   stop       destroy(), the workers joined, mu not held: finish what
**              must not wait for the last lent batch to come back.
**   delivered  the consumer, mu held: batch b (a host or a device slot)
**              took its place in the epoch: handed out, or passed over
**              because on_error SKIP left it empty.  Once per batch, not
**              per echo view.  What a feature counts of the batches is
**              counted here, so that a prefetched batch that is never
**              handed out counts nothing.
**   assigned   a worker w, mu held: it just opened batch b on a slot (a
**              feature may reset its marks on the slot).
**   chunk      a worker w, mu not held: it is about to fill a chunk.
**   destroy    no other thread runs: free the state (also on a loader
**              whose create failed half way).
**   started    create, every thread started, mu not held: the loader is
**              whole (its stats may be read from now on); last of create.
** The fill chain, on a worker, mu not held, for a sample with its own
** random stream (s->index, s->epoch and s->dst set), before and after the
** source; features without these hooks are not in the chain:
**   fill_known_bad  sample index is known to be bad: it is not read, the
**              bad-sample policies handle it (asked before fill_get).
**   fill_get   serve sample s without the source (counting it in ps):
**              true when it did, and the source is not asked.
**   fill_put   the source just produced sample s: keep it if wanted.
**   fill_failed  the sample at position pos of b (source index `index`)
**              failed to fill, its reason in w->err, or a feature knows it
**              bad (known_bad: it was not read): the first listed feature
**              with this hook handles it (the bad-sample policies: skip,
**              replace or fail).  Returns 0 when the batch may go on, else
**              a STOKE_E* after poisoning the loader.  Called only for a
**              bad sample, so not part of `fills`.
**   filled     the worker that wrote b's last sample (the consumer at
**              W = 0), mu not held, before the batch is READY: finish it
**              (close the gaps of skipped samples).  Once per batch. */
#ifndef STOKE_PIPELINE_FEATURE_H
#define STOKE_PIPELINE_FEATURE_H

#include "core/core.h"
#include "os/os.h"
#include "stats/stats.h"
#include "sampler/sampler.h"
#include "source/source.h"

typedef struct stoke__worker stoke__worker;

typedef struct stoke__feature_ops {
  const char *name;
  bool (*may_claim)(const stoke_loader *l, const void *state);
  void (*freed)(stoke_loader *l, void *state);
  void (*compute)(stoke_loader *l, void *state, int64_t compute_ns);
  void (*step)(stoke_loader *l, void *state, int64_t wait_ns, bool empty);
  void (*epoch_start)(stoke_loader *l, void *state);
  void (*epoch_end)(stoke_loader *l, void *state);
  void (*stats)(const stoke_loader *l, const void *state, stoke_stats *st);
  void (*stop)(stoke_loader *l, void *state);
  void (*delivered)(stoke_loader *l, void *state, const stoke_batch *b);
  void (*assigned)(stoke_loader *l, void *state, stoke__worker *w,
                   stoke_batch *b);
  void (*chunk)(stoke_loader *l, void *state, stoke__worker *w);
  void (*destroy)(stoke_loader *l, void *state);
  bool (*fill_known_bad)(const stoke_loader *l, const void *state,
                         size_t index);
  bool (*fill_get)(const stoke_loader *l, void *state, stoke_sample *s,
                   stoke__producer_stats *ps);
  void (*fill_put)(const stoke_loader *l, void *state, const stoke_sample *s);
  int (*fill_failed)(stoke_loader *l, void *state, stoke__worker *w,
                     stoke_batch *b, size_t pos, size_t index, bool known_bad,
                     bool timed);
  void (*filled)(stoke_loader *l, void *state, stoke_batch *b);
  void (*started)(stoke_loader *l, void *state);
} stoke__feature_ops;

typedef struct stoke__feature {
  const stoke__feature_ops *ops;
  void *state;                   /* the feature's, owned by it */
} stoke__feature;

/* Room for every feature there is; a loader lists the ones that are on. */
#define STOKE__MAX_FEATURES 16

typedef struct stoke__features {
  stoke__feature f[STOKE__MAX_FEATURES];
  unsigned n;                    /* set at create, then frozen */
  /* Some listed feature has a fill hook: without one the core fills
  ** straight from the source, with no call or test per sample. */
  bool fills;
} stoke__features;

/* At create: list a feature that is on (the order is the hooks' order). */
void stoke__feature_add(stoke__features *fs, const stoke__feature_ops *ops,
                        void *state);
/* The state of the listed feature with these ops, or NULL: it is off. */
void *stoke__feature_state(const stoke__features *fs,
                           const stoke__feature_ops *ops);

/* The core's calls at its fixed points (see above for threads and locks). */
bool stoke__features_may_claim(const stoke__features *fs,
                               const stoke_loader *l);
void stoke__features_freed(const stoke__features *fs, stoke_loader *l);
void stoke__features_compute(const stoke__features *fs, stoke_loader *l,
                             int64_t compute_ns);
void stoke__features_step(const stoke__features *fs, stoke_loader *l,
                          int64_t wait_ns, bool empty);
void stoke__features_epoch_start(const stoke__features *fs, stoke_loader *l);
void stoke__features_epoch_end(const stoke__features *fs, stoke_loader *l);
void stoke__features_stats(const stoke__features *fs, const stoke_loader *l,
                           stoke_stats *st);
void stoke__features_stop(const stoke__features *fs, stoke_loader *l);
void stoke__features_started(const stoke__features *fs, stoke_loader *l);
/* The fill chain (fs->fills): true when a feature knows sample index is
** bad; true when a feature served s. */
bool stoke__features_fill_known_bad(const stoke__features *fs,
                                    const stoke_loader *l, size_t index);
bool stoke__features_fill_get(const stoke__features *fs,
                              const stoke_loader *l, stoke_sample *s,
                              stoke__producer_stats *ps);
void stoke__features_fill_put(const stoke__features *fs,
                              const stoke_loader *l, const stoke_sample *s);
/* A bad sample: the first feature with a fill_failed hook handles it and
** its result goes to *rc; false when no listed feature has the hook. */
bool stoke__features_fill_failed(const stoke__features *fs, stoke_loader *l,
                                 stoke__worker *w, stoke_batch *b, size_t pos,
                                 size_t index, bool known_bad, bool timed,
                                 int *rc);
void stoke__features_filled(const stoke__features *fs, stoke_loader *l,
                            stoke_batch *b);
void stoke__features_delivered(const stoke__features *fs, stoke_loader *l,
                               const stoke_batch *b);
void stoke__features_assigned(const stoke__features *fs, stoke_loader *l,
                              stoke__worker *w, stoke_batch *b);
void stoke__features_chunk(const stoke__features *fs, stoke_loader *l,
                           stoke__worker *w);
/* Destroys every listed feature, the last listed first, and empties the
** list. */
void stoke__features_destroy(stoke__features *fs, stoke_loader *l);

/* The features (their files).  Each create lists itself when it is on. */
/* autotuner.c: the live autotuner (cfg.autotune). */
extern const stoke__feature_ops stoke__autotuner_feature;
/* packcache.c: the packing cache (cfg.cache_dir). */
extern const stoke__feature_ops stoke__packcache_feature;
/* quarantine_feature.c (cfg.quarantine_path) keeps its ops to itself:
** stoke__quarantine_of finds its state. */
/* ramcache.c: the RAM cache of deterministic samples (cfg.ram_cache_bytes). */
extern const stoke__feature_ops stoke__ramcache_feature;
/* publish_feature.c: the live view's snapshots (cfg.publish). */
extern const stoke__feature_ops stoke__publish_feature;

#endif /* STOKE_PIPELINE_FEATURE_H */
