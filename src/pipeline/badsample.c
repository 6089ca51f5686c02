/* badsample.c — what a bad sample does: stoke_config.on_error, the failure
** log and budget, and the quarantine.
**
** DESIGN
** A fill that fails (or a sample the quarantine lists, which is not read)
** reaches the fill_failed hook (bad_sample) on the worker that met it:
**
**   FAIL     logged, then the loader is poisoned with the message it always
**            had ("sample 17 (file) (epoch 0, batch 2) failed: why");
**   SKIP     logged and flagged in its batch; the batch's last writer
**            closes the gaps (the filled hook), so the batch is shorter
**            and its indices list only what it holds;
**   REPLACE  logged, and candidates are drawn from the bad sample's own
**            random stream (seed, epoch, index) at counters from 2^63 on,
**            far past anything a fill draws, until one fills: it takes the
**            bad sample's place (stoke_batch_indices says which), filled
**            with a stream of its own (the bad sample's key mixed with the
**            try number), so that it is not a copy of its own appearance
**            elsewhere in the epoch.  Candidates are a pure function of
**            (seed, epoch, index), so the substitute is the same whatever
**            worker met the bad sample, and when.  A candidate that is the
**            bad sample itself or listed in the quarantine is passed over;
**            one that fails is a bad sample too (logged, counted,
**            quarantined).  Each candidate is a try; after
**            max_replace_tries the bad sample is an error.
**
** The budget counts the bad samples found (not those the quarantine lists)
** per claim generation, i.e. per epoch as the workers produce it; the one
** over budget poisons the loader with STOKE_EFAILURES naming the last few.
**
** What is counted and logged is only what reached the consumer.  A record
** waits in `pending`, tagged with its batch, until the core hands that
** batch out (the delivered hook) or the batch ends the run with an error;
** then it goes to the log and the counters, in the batch's position
** order.  Workers prefetch the next epoch before this one is over, and a
** run that stops at its last epoch never consumes those batches: counted
** as they were produced, they made the counters depend on timing.  So the
** log and the counters of a run with a fixed seed are the same for any
** number of workers, and every time.  The budget is not: it must stop the
** workers as they meet the bad samples.
**
** Locking: fail_mu (a leaf) guards the log, the pending records, the
** counters and the budget; it may be taken with mu held (the delivered
** hook), but nothing is taken while holding it.  The quarantine has its
** own leaf lock; the loader's mu is only taken, alone, to poison it.  No
** lock is held across a fill. */
#include "pipeline.h"
#include "pipeline/feature.h"

#include <stdio.h>
#include <string.h>

/* Substitute candidates: the bad sample's stream from this counter on. */
#define CANDIDATE_COUNTER (UINT64_C(1) << 63)
/* Mixed into the bad sample's key with the try number: the substitute's
** own fill stream. */
#define SUBSTITUTE_SALT UINT64_C(0x5ab571707e5eed00)

/* A record that waits for its batch to be handed out. */
typedef struct pending_record {
  uint64_t gen;                  /* its batch's claim generation */
  size_t pos;                    /* its place in the batch: commit order */
  stoke_failure f;               /* f.batch: its batch's number */
} pending_record;

/* The bad-sample state of a loader (always on: FAIL logs too). */
typedef struct stoke__bad {
  uint64_t fail_budget;          /* bad samples allowed per epoch (per claim
                                    generation); 0 = no limit.  Frozen. */
  pthread_mutex_t fail_mu;       /* leaf: never taken with mu, stats_mu or
                                    the quarantine's lock held, nor held
                                    while taking them */
  bool have_mu;
  /* Protected by fail_mu. */
  stoke_failure *fail_ring;      /* STOKE_FAILURES_KEPT, the last ones */
  size_t fail_head, fail_len;
  pending_record *pending;       /* records of batches not handed out yet */
  size_t n_pending, cap_pending;
  const stoke_allocator *alloc;
  uint64_t n_failures, n_quarantined, n_skipped, n_replaced;
  bool fail_tripped;             /* a record spent the budget */
  char fail_msg[STOKE__ERRMSG_CAP]; /* the first such record's message
                                    (its count: budget + 1); written once,
                                    before fail_tripped */
  struct {
    uint64_t gen, n;
  } fail_gen[3];                 /* bad samples per claim generation: those
                                    of the epochs in flight (delivered and
                                    prefetched) */
} stoke__bad;

static const stoke__feature_ops bad_feature;

static stoke__bad *bad_of(const stoke_loader *l) {
  return stoke__feature_state(&l->features, &bad_feature);
}

const char *stoke_on_error_name(int on_error) {
  switch (on_error) {
  case STOKE_ON_ERROR_FAIL: return "fail";
  case STOKE_ON_ERROR_SKIP: return "skip";
  case STOKE_ON_ERROR_REPLACE: return "replace";
  default: return "?";
  }
}

uint64_t stoke__bad_bytes(const stoke_config *c, const stoke_source *src) {
  uint64_t n = (uint64_t)STOKE_FAILURES_KEPT * sizeof(stoke_failure);
  if (c->on_error == STOKE_ON_ERROR_SKIP) /* a flag per sample per slot */
    n += ((uint64_t)c->prefetch + c->consumer_slots) * c->batch_size;
  if (c->quarantine_path) n += stoke__quarantine_bytes(src->n_samples);
  return n;
}

int stoke__bad_init(stoke_loader *l) {
  const stoke_config *c = &l->cfg;
  stoke__bad *bs = stoke__calloc(l->alloc, 1, sizeof *bs);
  if (!bs) return STOKE_ENOMEM;
  /* Listed at once: its destroy frees what a failure below leaves. */
  bs->alloc = l->alloc;
  stoke__feature_add(&l->features, &bad_feature, bs);
  if (pthread_mutex_init(&bs->fail_mu, NULL) != 0) return STOKE_ENOMEM;
  bs->have_mu = true;
  bs->fail_ring = stoke__calloc(l->alloc, STOKE_FAILURES_KEPT,
                               sizeof *bs->fail_ring);
  if (!bs->fail_ring) return STOKE_ENOMEM;
  if (c->on_error == STOKE_ON_ERROR_SKIP)
    for (size_t i = 0; i < l->n_slots; i++) {
      l->slots[i].skip = stoke__calloc(l->alloc, c->batch_size, 1);
      if (!l->slots[i].skip) return STOKE_ENOMEM;
    }
  if (c->on_error != STOKE_ON_ERROR_FAIL) {
    if (c->max_failures > 0)
      bs->fail_budget = c->max_failures;
    else if (c->max_failure_frac > 0) {
      double want = c->max_failure_frac * (double)l->plan.per_rank;
      uint64_t n = (uint64_t)want;
      bs->fail_budget = (double)n < want ? n + 1 : n;
      if (bs->fail_budget == 0) bs->fail_budget = 1;
    }
  }
  /* The quarantine is its own feature, listed after this one. */
  return stoke__quarantine_create(l);
}

static void destroy(stoke_loader *l, void *state) {
  stoke__bad *bs = state;
  stoke__free(l->alloc, bs->fail_ring);
  stoke__free(l->alloc, bs->pending);
  if (l->slots)
    for (size_t i = 0; i < l->n_slots; i++)
      stoke__free(l->alloc, l->slots[i].skip);
  if (bs->have_mu) pthread_mutex_destroy(&bs->fail_mu);
  stoke__free(l->alloc, bs);
}

/* ---- the log and the budget ------------------------------------------------ */

static void log_failure(stoke__bad *bs, const stoke_failure *f) {
  size_t at = (bs->fail_head + bs->fail_len) % STOKE_FAILURES_KEPT;
  if (bs->fail_len == STOKE_FAILURES_KEPT)
    bs->fail_head = (bs->fail_head + 1) % STOKE_FAILURES_KEPT;
  else
    bs->fail_len++;
  bs->fail_ring[at] = *f;
}

static void commit_one(stoke__bad *bs, const stoke_failure *f);

/* Keep f, met in batch (gen, f->batch) at position pos, until that batch
** is handed out (fail_mu held).  Out of memory, it is logged and counted
** at once: counted early beats lost. */
static void pend(stoke__bad *bs, uint64_t gen, size_t pos,
                 const stoke_failure *f) {
  if (bs->n_pending == bs->cap_pending) {
    size_t cap = bs->cap_pending ? 2 * bs->cap_pending : 16;
    pending_record *p = stoke__calloc(bs->alloc, cap, sizeof *p);
    if (!p) {
      commit_one(bs, f);
      return;
    }
    if (bs->n_pending)
      memcpy(p, bs->pending, bs->n_pending * sizeof *p);
    stoke__free(bs->alloc, bs->pending);
    bs->pending = p;
    bs->cap_pending = cap;
  }
  pending_record *r = &bs->pending[bs->n_pending++];
  r->gen = gen;
  r->pos = pos;
  r->f = *f;
}

/* Count and log one record whose batch reached the consumer. */
static void commit_one(stoke__bad *bs, const stoke_failure *f) {
  log_failure(bs, f);
  if (f->quarantined)
    bs->n_quarantined++;
  else
    bs->n_failures++;
  if (f->action == STOKE_ON_ERROR_SKIP) bs->n_skipped++;
  if (f->action == STOKE_ON_ERROR_REPLACE && f->substitute != SIZE_MAX)
    bs->n_replaced++;
}

/* Batch (gen, number) reached the consumer (fail_mu held): its records
** go to the log and the counters in position order (within a position,
** as met: one worker meets a sample and its candidates in turn), and
** those of older generations, never to be handed out, are dropped. */
static void commit_batch(stoke__bad *bs, uint64_t gen, size_t number) {
  size_t kept = 0;
  for (;;) {
    /* The lowest position left of this batch, first met first. */
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < bs->n_pending; i++) {
      const pending_record *r = &bs->pending[i];
      if (r->gen == gen && r->f.batch == number &&
          (best == SIZE_MAX || r->pos < bs->pending[best].pos))
        best = i;
    }
    if (best == SIZE_MAX) break;
    commit_one(bs, &bs->pending[best].f);
    bs->pending[best].gen = UINT64_MAX; /* done: dropped below */
  }
  for (size_t i = 0; i < bs->n_pending; i++) {
    const pending_record *r = &bs->pending[i];
    if (r->gen == UINT64_MAX || r->gen < gen) continue;
    bs->pending[kept++] = *r;
  }
  bs->n_pending = kept;
}

/* Count one more bad sample of generation gen (fail_mu held); its count. */
static uint64_t count_in_gen(stoke__bad *bs, uint64_t gen) {
  size_t free_at = 0;
  bool have_free = false;
  for (size_t i = 0; i < 3; i++) {
    if (bs->fail_gen[i].n && bs->fail_gen[i].gen == gen)
      return ++bs->fail_gen[i].n;
    /* A generation neither delivered nor claimed is over: reuse it.  (The
    ** generations read here are written under mu; a stale read can only
    ** pick another over generation.) */
    if (!have_free && (bs->fail_gen[i].n == 0 ||
                       bs->fail_gen[i].gen + 1 < gen)) {
      free_at = i;
      have_free = true;
    }
  }
  if (!have_free) {
    /* The oldest. */
    for (size_t i = 1; i < 3; i++)
      if (bs->fail_gen[i].gen < bs->fail_gen[free_at].gen) free_at = i;
  }
  bs->fail_gen[free_at].gen = gen;
  bs->fail_gen[free_at].n = 1;
  return 1;
}

/* The last few logged, newest first, as "sample 17 (where): why; ..." into
** buf (fail_mu held). */
static void last_few(const stoke__bad *bs, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  /* The records still pending are the newest: they come first. */
  for (size_t k = 0; k < bs->n_pending + bs->fail_len; k++) {
    const stoke_failure *f;
    if (k < bs->n_pending) {
      f = &bs->pending[bs->n_pending - 1 - k].f;
    } else {
      size_t j = k - bs->n_pending;
      f = &bs->fail_ring[(bs->fail_head + bs->fail_len - 1 - j) %
                         STOKE_FAILURES_KEPT];
    }
    /* A long path keeps its end: the file's name is what names it. */
    size_t wl = strlen(f->where);
    const char *where = wl > 80 ? f->where + wl - 77 : f->where;
    char one[300];
    int w = snprintf(one, sizeof one, "%ssample %zu%s%s%s%s: %.100s",
                     k ? "; " : "", f->index, f->where[0] ? " (" : "",
                     wl > 80 ? "..." : "", where, f->where[0] ? ")" : "",
                     f->reason);
    /* Whole entries only: a cut one would name half a file. */
    if (w < 0 || used + (size_t)w + 1 > cap) break;
    memcpy(buf + used, one, (size_t)w + 1);
    used += (size_t)w;
  }
}

/* Keep f (a bad sample met while producing batch b, at position pos) for
** the log and, unless the quarantine listed it, count it against the
** budget.  Returns 0, or STOKE_EFAILURES after poisoning the loader when
** it spends the budget. */
static int record(stoke_loader *l, const stoke_batch *b, size_t pos,
                  stoke_failure *f) {
  stoke__bad *bs = bad_of(l);
  stoke__quarantine *q = stoke__quarantine_of(l);
  if (!f->quarantined && q) {
    char note[256];
    stoke__quarantine_add(q, f->index, f->where, f->reason, note,
                          sizeof note);
    if (note[0]) {
      size_t n = strlen(f->reason);
      snprintf(f->reason + n, sizeof f->reason - n, " (not quarantined: %s)",
               note);
    }
  }
  bool over = false;
  uint64_t n = 0;
  pthread_mutex_lock(&bs->fail_mu);
  if (!f->quarantined && bs->fail_budget) {
    n = count_in_gen(bs, b->gen);
    over = n > bs->fail_budget;
  }
  if (over) f->action = STOKE_ON_ERROR_FAIL; /* it ends the run */
  pend(bs, b->gen, pos, f);
  /* Workers that spend the budget at once all poison (each notes its
  ** batch, which will not come), with the first one's message: its count
  ** (budget + 1) and last few, whichever of them takes mu first. */
  if (over && !bs->fail_tripped) {
    char few[300], why[64]; /* what fits after the message's start */
    last_few(bs, few, sizeof few);
    if (l->cfg.max_failures > 0)
      snprintf(why, sizeof why, "max_failures");
    else
      snprintf(why, sizeof why, "%g%% of %zu samples",
               100 * l->cfg.max_failure_frac, l->plan.per_rank);
    snprintf(bs->fail_msg, sizeof bs->fail_msg,
             "too many bad samples: %llu in epoch %llu, over the failure "
             "budget of %llu (%s); the last: %s",
             (unsigned long long)n, (unsigned long long)b->epoch,
             (unsigned long long)bs->fail_budget, why, few);
    bs->fail_tripped = true;
  }
  if (over) commit_batch(bs, b->gen, b->number); /* it ends the run */
  pthread_mutex_unlock(&bs->fail_mu);
  if (!over) return 0;
  /* fail_msg is final: written under fail_mu before any record saw
  ** fail_tripped, as this one did. */
  pthread_mutex_lock(&l->mu);
  stoke__note_failed_batch(l, b);
  stoke__fail_locked(l, STOKE_EFAILURES, "%s", bs->fail_msg);
  pthread_mutex_unlock(&l->mu);
  return STOKE_EFAILURES;
}

/* Name the substitute of the pending failure of (index, epoch, batch) of
** generation gen: it counts as replaced when its batch is handed out. */
static void log_substitute(stoke_loader *l, uint64_t gen,
                           const stoke_failure *f, size_t substitute) {
  stoke__bad *bs = bad_of(l);
  pthread_mutex_lock(&bs->fail_mu);
  for (size_t k = 0; k < bs->n_pending; k++) {
    pending_record *r = &bs->pending[k];
    stoke_failure *g = &r->f;
    if (r->gen == gen && g->index == f->index && g->epoch == f->epoch &&
        g->batch == f->batch && g->substitute == SIZE_MAX &&
        g->action == STOKE_ON_ERROR_REPLACE)
      g->substitute = substitute;
  }
  pthread_mutex_unlock(&bs->fail_mu);
}

/* The batch ends the run with an error: what it met is logged, as what
** the consumer got instead of the batch. */
static void commit_failed(stoke_loader *l, const stoke_batch *b) {
  stoke__bad *bs = bad_of(l);
  pthread_mutex_lock(&bs->fail_mu);
  commit_batch(bs, b->gen, b->number);
  pthread_mutex_unlock(&bs->fail_mu);
}

static void delivered(stoke_loader *l, void *state, const stoke_batch *b) {
  (void)l;
  stoke__bad *bs = state;
  pthread_mutex_lock(&bs->fail_mu);
  if (bs->n_pending) commit_batch(bs, b->gen, b->number);
  pthread_mutex_unlock(&bs->fail_mu);
}

static void describe_failure(const stoke_loader *l, const stoke__worker *w,
                             const stoke_batch *b, size_t index,
                             bool quarantined, stoke_failure *f) {
  memset(f, 0, sizeof *f);
  f->index = index;
  f->epoch = b->epoch;
  f->batch = b->number;
  f->action = l->cfg.on_error;
  f->quarantined = quarantined;
  f->substitute = SIZE_MAX;
  stoke_source_describe(l->src, index, f->where, sizeof f->where);
  if (quarantined)
    snprintf(f->reason, sizeof f->reason, "listed in the quarantine %s",
             stoke__quarantine_path(stoke__quarantine_of(l)));
  else
    snprintf(f->reason, sizeof f->reason, "%s",
             w->err[0] ? w->err : "no reason given");
}

/* ---- the policies -------------------------------------------------------- */

static int fail(stoke_loader *l, const stoke_batch *b,
                const stoke_failure *f) {
  char where[300] = "";
  if (l->src->ops->describe) snprintf(where, sizeof where, " (%s)", f->where);
  commit_failed(l, b);
  pthread_mutex_lock(&l->mu);
  stoke__note_failed_batch(l, b);
  if (f->quarantined)
    stoke__fail_locked(l, STOKE_ESAMPLE,
                       "sample %zu%s (epoch %llu, batch %zu) is listed in "
                       "the quarantine %s", f->index, where,
                       (unsigned long long)b->epoch, b->number,
                       stoke__quarantine_path(stoke__quarantine_of(l)));
  else /* the message of every stoke before the policies */
    stoke__fail_locked(l, STOKE_ESAMPLE,
                       "sample %zu%s (epoch %llu, batch %zu) failed: %s",
                       f->index, where, (unsigned long long)b->epoch,
                       b->number, f->reason);
  pthread_mutex_unlock(&l->mu);
  return STOKE_ESAMPLE;
}

static int replace(stoke_loader *l, stoke__worker *w, stoke_batch *b,
                   size_t pos, const stoke_failure *bad, bool timed) {
  size_t n = l->src->n_samples;
  stoke_rng pick;
  stoke_rng_init(&pick, l->cfg.seed, b->epoch, bad->index);
  pick.counter = CANDIDATE_COUNTER;
  unsigned tries = l->cfg.max_replace_tries;
  const stoke__quarantine *q = stoke__quarantine_of(l);
  for (unsigned t = 0; t < tries; t++) {
    if (atomic_load_explicit(&l->stop, memory_order_relaxed))
      return STOKE_EBADSTATE;
    size_t c = (size_t)stoke_rng_below(&pick, n);
    if (c == bad->index || stoke__quarantine_has(q, c)) continue;
    stoke_rng own;
    stoke_rng_init(&own, l->cfg.seed, b->epoch, bad->index);
    own.key = stoke__mix64(own.key ^ (SUBSTITUTE_SALT + t));
    if (stoke__fill_one(l, w, b, pos, c, &own, timed) == 0) {
      b->indices[pos] = c;
      atomic_fetch_add_explicit(&b->n_replaced, 1, memory_order_relaxed);
      log_substitute(l, b->gen, bad, c);
      return 0;
    }
    /* The substitute is bad too. */
    stoke_failure f;
    describe_failure(l, w, b, c, false, &f);
    int rc = record(l, b, pos, &f);
    if (rc != 0) return rc;
  }
  commit_failed(l, b);
  pthread_mutex_lock(&l->mu);
  stoke__note_failed_batch(l, b);
  stoke__fail_locked(l, STOKE_ESAMPLE,
                     "sample %zu%s%s%s (epoch %llu, batch %zu) failed and "
                     "no substitute could be filled in %u %s (the last "
                     "error: %s); its own error: %s", bad->index,
                     bad->where[0] ? " (" : "", bad->where,
                     bad->where[0] ? ")" : "", (unsigned long long)b->epoch,
                     b->number, tries, tries == 1 ? "try" : "tries",
                     w->err[0] ? w->err : "none, the candidates were listed "
                                          "in the quarantine",
                     bad->reason);
  pthread_mutex_unlock(&l->mu);
  return STOKE_ESAMPLE;
}

/* The fill chain's fill_failed hook: the policy of on_error. */
static int bad_sample(stoke_loader *l, void *state, stoke__worker *w,
                      stoke_batch *b, size_t pos, size_t index,
                      bool quarantined, bool timed) {
  (void)state;
  stoke_failure f;
  describe_failure(l, w, b, index, quarantined, &f);
  int rc = record(l, b, pos, &f);
  if (rc != 0) return rc;
  switch (l->cfg.on_error) {
  case STOKE_ON_ERROR_SKIP:
    b->skip[pos] = 1;
    atomic_fetch_add_explicit(&b->n_skipped, 1, memory_order_relaxed);
    return 0;
  case STOKE_ON_ERROR_REPLACE:
    return replace(l, w, b, pos, &f, timed);
  default:
    return fail(l, b, &f);
  }
}

/* A new batch on slot b (mu held): none of its samples is bad yet. */
static void assigned(stoke_loader *l, void *state, stoke__worker *w,
                     stoke_batch *b) {
  (void)l;
  (void)state;
  (void)w;
  atomic_store_explicit(&b->n_skipped, 0, memory_order_relaxed);
  atomic_store_explicit(&b->n_replaced, 0, memory_order_relaxed);
  if (b->skip) memset(b->skip, 0, b->n);
}

/* The last writer of a batch (the filled hook): with skipped samples,
** close the gaps. */
static void filled(stoke_loader *l, void *state, stoke_batch *b) {
  (void)state;
  if (!atomic_load_explicit(&b->n_skipped, memory_order_relaxed)) return;
  /* Example echoing: every copy's view closes the same gaps. */
  unsigned copies = stoke__echo_copies(&l->cfg);
  size_t kept = 0;
  for (size_t i = 0; i < b->n; i++) {
    if (b->skip[i]) continue;
    if (kept != i) {
      b->indices[kept] = b->indices[i];
      for (size_t f = 0; f < l->src->n_fields; f++) {
        size_t fb = l->outlet.field_bytes[f];
        for (unsigned j = 0; j < copies; j++) {
          char *base = (char *)b->data[f] + j * l->cfg.batch_size * fb;
          memmove(base + kept * fb, base + i * fb, fb);
        }
      }
    }
    kept++;
  }
  b->n = kept;
}

static void stats(const stoke_loader *l, const void *state, stoke_stats *st) {
  (void)l;
  stoke__bad *bs = (stoke__bad *)state; /* the lock is not state */
  pthread_mutex_lock(&bs->fail_mu);
  st->failures = bs->n_failures;
  st->quarantined = bs->n_quarantined;
  st->skipped = bs->n_skipped;
  st->replaced = bs->n_replaced;
  pthread_mutex_unlock(&bs->fail_mu);
}

size_t stoke_loader_failures(const stoke_loader *l, stoke_failure *out,
                             size_t cap) {
  stoke__bad *bs = l ? bad_of(l) : NULL;
  if (!bs) return 0;
  pthread_mutex_lock(&bs->fail_mu);
  size_t n = bs->fail_len;
  for (size_t k = 0; out && k < n && k < cap; k++)
    out[k] = bs->fail_ring[(bs->fail_head + k) % STOKE_FAILURES_KEPT];
  pthread_mutex_unlock(&bs->fail_mu);
  return n;
}

size_t stoke_batch_n_skipped(const stoke_batch *b) {
  return b ? atomic_load_explicit(&((stoke_batch *)b)->n_skipped,
                                  memory_order_relaxed)
           : 0;
}

size_t stoke_batch_n_replaced(const stoke_batch *b) {
  return b ? atomic_load_explicit(&((stoke_batch *)b)->n_replaced,
                                  memory_order_relaxed)
           : 0;
}

static const stoke__feature_ops bad_feature = {
    .name = "bad samples",
    .delivered = delivered,
    .assigned = assigned,
    .fill_failed = bad_sample,
    .filled = filled,
    .stats = stats,
    .destroy = destroy,
};
