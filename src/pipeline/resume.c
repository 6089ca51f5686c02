/* resume.c — resume: the loader's position as a few bytes.
**
** DESIGN
** The order of an epoch is a pure function of (seed, epoch, rank, world)
** and the batching (batch size, drop_last), never of W, K or timing, so a
** position is only (seed, epoch, batches handed out): a resumed loader
** computes the same order and starts claiming at that batch (its
** epoch_start hook, when the next epoch starts), with any worker count or
** prefetch depth.  Under REPLACE
** the substitutes are functions of (seed, epoch, index) too, so they come
** back the same.
**
** What a position means depends on the dataset (the indices) and on the
** sharding and batching of the epoch; the state carries them.  Another
** dataset is refused.  Another sharding or batching (an elastic restart
** with a new world size) cannot continue mid-epoch: the loader starts the
** next epoch, which every new rank then covers exactly once between them.
**
** Restoring is allowed between epochs only.  Workers may then be filling
** the next epoch ahead (prefetch_next_epoch); that work is discarded and
** waited for, so that no fill runs while the seed changes.
**
** It is a feature (feature.h), always listed: its state is the restored
** position and the source's fingerprint, computed once. */
#include "pipeline.h"

#include <stdio.h>
#include <string.h>

#include "storage/blob.h" /* little-endian helpers, CRC-32 */

typedef struct stoke__resume {
  size_t batch;                  /* mu: the next epoch begins at this
                                    batch (then 0 again) */
  unsigned view;                 /* mu: and at this step of its group */
  uint64_t fingerprint;          /* of src, computed once */
  bool have_fingerprint;
} stoke__resume;

static void destroy(stoke_loader *l, void *state) {
  stoke__free(l->alloc, state);
}

/* The epoch starts where a restored state was (mu held). */
static void epoch_start(stoke_loader *l, void *state) {
  stoke__resume *r = state;
  if (r->batch) {
    l->next_batch = l->next_deliver = l->n_delivered = r->batch;
    r->batch = 0;
  }
  stoke__echo_start_at_locked(l, r->view); /* the first group's first step */
  r->view = 0;
}

static const stoke__feature_ops resume_feature = {
    .name = "resume",
    .epoch_start = epoch_start,
    .destroy = destroy,
};

int stoke__resume_create(stoke_loader *l) {
  stoke__resume *r = stoke__calloc(l->alloc, 1, sizeof *r);
  if (!r) return STOKE_ENOMEM;
  stoke__feature_add(&l->features, &resume_feature, r);
  return 0;
}

static stoke__resume *resume_of(const stoke_loader *l) {
  return stoke__feature_state(&l->features, &resume_feature);
}

uint64_t stoke__loader_fingerprint(stoke_loader *l) {
  stoke__resume *r = resume_of(l);
  if (!r->have_fingerprint) {
    r->fingerprint = stoke_source_fingerprint(l->src);
    r->have_fingerprint = true;
  }
  return r->fingerprint;
}

static const uint8_t STATE_MAGIC[8] = {'S', 'T', 'O', 'K', 'S', 'T', 'A',
                                       'T'};

enum {
  FLAG_SHUFFLE = 1,
  FLAG_DROP_LAST = 2,
  FLAG_SHARD_DROP_LAST = 4,
  FLAG_BLOCK = 8 /* with FLAG_SHUFFLE: the block order (since 0.3) */
};

/* What else fixes an epoch's order and batches: the block order's cut and
** window, and echoing.  0 for the uniform or sequential order without
** echo, as in a state of 0.2 (bytes 72..75 were reserved, zero). */
static uint32_t order_key(const stoke_config *c) {
  uint64_t h = 0;
  if (c->shuffle == STOKE_SHUFFLE_BLOCK) {
    h = stoke__hash_u64(h, 0xB10C);
    h = stoke__hash_u64(h, c->shuffle_block_bytes ? c->shuffle_block_bytes
                                                  : STOKE_BLOCK_BYTES_DEFAULT);
    h = stoke__hash_u64(h, c->shuffle_window ? c->shuffle_window
                                             : STOKE_BLOCK_WINDOW_DEFAULT);
  }
  if (c->echo > 1) {
    h = stoke__hash_u64(h, 0xEC40);
    h = stoke__hash_u64(h, c->echo);
    h = stoke__hash_u64(h, (uint64_t)c->echo_mode);
  }
  uint32_t k = (uint32_t)(h ^ (h >> 32));
  return h && !k ? 1 : k;
}


/* With in_order 0, are the batches handed out this epoch its first
** n_delivered (mu held)?  The others are in slots or not assigned yet. */
static bool delivered_prefix(const stoke_loader *l) {
  for (size_t i = 0; i < l->n_slots; i++) {
    const stoke_batch *b = &l->slots[i];
    if (b->gen == l->deliver_gen &&
        (b->state == STOKE__SLOT_FILLING || b->state == STOKE__SLOT_READY) &&
        b->number < l->n_delivered)
      return false;
  }
  return true;
}

int stoke_loader_state_save(const stoke_loader *cl, stoke_loader_state *out) {
  if (!cl || !out) return STOKE_EINVAL;
  stoke_loader *l = (stoke_loader *)cl; /* the fingerprint cache, the lock */
  uint64_t fp = stoke__loader_fingerprint(l);
  int rc = 0;
  pthread_mutex_lock(&l->mu);
  memset(out, 0, sizeof *out);
  out->version = STOKE_STATE_VERSION;
  out->seed = l->cfg.seed;
  if (l->epoch_active) {
    out->epoch = l->epoch;
    /* Steps: with echoing, echo per batch (echo.c). */
    out->batches_done = stoke__echo_steps_locked(l);
    if (!l->cfg.in_order && l->n_delivered < l->plan.n_batches &&
        !delivered_prefix(l)) {
      snprintf(l->lastmsg, sizeof l->lastmsg,
               "state: out of order, the %zu batches handed out of epoch "
               "%llu are not its first ones; save the state between epochs "
               "(or run in order)", l->n_delivered,
               (unsigned long long)l->epoch);
      rc = STOKE_EINVAL;
    }
  } else {
    out->epoch = l->next_epoch;
    /* restored and not started yet */
    const stoke__resume *r = resume_of(l);
    out->batches_done = (uint64_t)r->batch * l->cfg.echo + r->view;
  }
  pthread_mutex_unlock(&l->mu);
  out->n_samples = l->src->n_samples;
  out->fingerprint = fp;
  out->batch_size = l->cfg.batch_size;
  out->rank = l->cfg.rank;
  out->world = l->cfg.world;
  out->shuffle = (uint32_t)l->cfg.shuffle;
  out->drop_last = (uint32_t)l->cfg.drop_last;
  out->shard_drop_last = (uint32_t)l->cfg.shard_drop_last;
  out->order_key = order_key(&l->cfg);
  return rc;
}

static int refuse(stoke_loader *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int refuse(stoke_loader *l, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&l->mu);
  vsnprintf(l->lastmsg, sizeof l->lastmsg, fmt, ap);
  pthread_mutex_unlock(&l->mu);
  va_end(ap);
  return STOKE_EINVAL;
}

/* Does st's position mean the same batches in this loader? */
static bool same_batching(const stoke_loader *l, const stoke_loader_state *st) {
  return st->world == l->cfg.world && st->rank == l->cfg.rank &&
         st->batch_size == l->cfg.batch_size &&
         st->shuffle == (uint32_t)l->cfg.shuffle &&
         st->order_key == order_key(&l->cfg) &&
         (st->drop_last != 0) == (l->cfg.drop_last != 0) &&
         (st->shard_drop_last != 0) == (l->cfg.shard_drop_last != 0);
}

int stoke_loader_state_restore(stoke_loader *l, const stoke_loader_state *st) {
  if (!l || !st) return STOKE_EINVAL;
  if (st->version != STOKE_STATE_VERSION)
    return refuse(l, "state: version %u, this stoke reads version %d",
                  st->version, STOKE_STATE_VERSION);
  uint64_t fp = stoke__loader_fingerprint(l);
  if (st->n_samples != l->src->n_samples || st->fingerprint != fp)
    return refuse(l,
                  "state: made for another dataset (%llu samples, "
                  "fingerprint 0x%016llx); this loader's %s source has %zu "
                  "samples, fingerprint 0x%016llx",
                  (unsigned long long)st->n_samples,
                  (unsigned long long)st->fingerprint, l->src->kind,
                  l->src->n_samples, (unsigned long long)fp);
  uint64_t epoch = st->epoch, at = st->batches_done;
  bool elastic = !same_batching(l, st);
  if (!elastic && at > (uint64_t)l->plan.n_batches * l->cfg.echo)
    return refuse(l, "state: %llu batches done in epoch %llu, but it has %zu",
                  (unsigned long long)at, (unsigned long long)epoch,
                  l->plan.n_batches * l->cfg.echo);
  pthread_mutex_lock(&l->mu);
  if (l->error) {
    pthread_mutex_unlock(&l->mu);
    return STOKE_EBADSTATE;
  }
  if (l->epoch_active) {
    snprintf(l->lastmsg, sizeof l->lastmsg,
             "state: restore during epoch %llu: call it between epochs",
             (unsigned long long)l->epoch);
    pthread_mutex_unlock(&l->mu);
    return STOKE_EINVAL;
  }
  if (elastic && at > 0) {
    snprintf(l->lastmsg, sizeof l->lastmsg,
             "state: taken with world %u, rank %u, batch size %llu%s; here "
             "world %u, rank %u, batch size %zu: %llu batches of epoch %llu "
             "mean other samples here, so this loader starts at epoch %llu",
             st->world, st->rank, (unsigned long long)st->batch_size,
             st->shuffle ? ", shuffled" : "", l->cfg.world, l->cfg.rank,
             l->cfg.batch_size, (unsigned long long)at,
             (unsigned long long)epoch, (unsigned long long)epoch + 1);
    epoch++;
    at = 0;
  } else {
    l->lastmsg[0] = '\0';
  }
  /* Nothing prefetched may survive, and no fill may run, while the seed
  ** and the position change. */
  while (l->order_busy) pthread_cond_wait(&l->ready_cv, &l->mu);
  if (l->claim_open && l->claim_gen != l->deliver_gen)
    stoke__discard_prefetch(l);
  l->claim_open = false;
  for (bool filling = true; filling;) {
    filling = false;
    for (size_t i = 0; i < l->n_slots; i++)
      filling |= l->slots[i].state == STOKE__SLOT_FILLING;
    if (filling) pthread_cond_wait(&l->work_cv, &l->mu);
  }
  if (st->seed != l->cfg.seed) {
    l->cfg.seed = l->plan.seed = st->seed;
    for (size_t i = 0; i < STOKE__MAX(l->n_workers, 1); i++)
      l->workers[i].sample.seed = st->seed;
  }
  l->next_epoch = epoch;
  stoke__resume *r = resume_of(l);
  r->batch = (size_t)(at / l->cfg.echo);
  r->view = (unsigned)(at % l->cfg.echo);
  pthread_mutex_unlock(&l->mu);
  return 0;
}

int stoke_loader_state_encode(const stoke_loader_state *st, void *buf,
                              size_t cap, size_t *n) {
  if (n) *n = STOKE_STATE_BYTES;
  if (!st || !buf || cap < STOKE_STATE_BYTES) return STOKE_EINVAL;
  uint8_t *p = buf;
  memset(p, 0, STOKE_STATE_BYTES);
  memcpy(p, STATE_MAGIC, 8);
  stoke__put_le32(p + 8, st->version);
  stoke__put_le32(p + 12, (st->shuffle ? FLAG_SHUFFLE : 0) |
                              (st->shuffle == STOKE_SHUFFLE_BLOCK ? FLAG_BLOCK
                                                                  : 0) |
                              (st->drop_last ? FLAG_DROP_LAST : 0) |
                              (st->shard_drop_last ? FLAG_SHARD_DROP_LAST : 0));
  stoke__put_le64(p + 16, st->seed);
  stoke__put_le64(p + 24, st->epoch);
  stoke__put_le64(p + 32, st->batches_done);
  stoke__put_le64(p + 40, st->n_samples);
  stoke__put_le64(p + 48, st->fingerprint);
  stoke__put_le64(p + 56, st->batch_size);
  stoke__put_le32(p + 64, st->rank);
  stoke__put_le32(p + 68, st->world);
  stoke__put_le32(p + 72, st->order_key); /* reserved (zero) before 0.3 */
  stoke__put_le32(p + 76, stoke__crc32(0, p, 76));
  return 0;
}

int stoke_loader_state_decode(const void *buf, size_t n,
                              stoke_loader_state *out) {
  if (!buf || !out)
    return stoke__set_tls_error(STOKE_EINVAL, "state: NULL argument");
  const uint8_t *p = buf;
  if (n != STOKE_STATE_BYTES)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "state: %zu bytes, a stoke state has %d", n,
                                STOKE_STATE_BYTES);
  if (memcmp(p, STATE_MAGIC, 8) != 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "state: not a stoke loader state (no "
                                "STOKSTAT magic)");
  uint32_t crc = stoke__crc32(0, p, 76);
  if (crc != stoke__le32(p + 76))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "state: CRC-32 mismatch (stored %08x, "
                                "computed %08x): the bytes are damaged",
                                stoke__le32(p + 76), crc);
  uint32_t version = stoke__le32(p + 8);
  if (version != STOKE_STATE_VERSION)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "state: version %u, this stoke reads "
                                "version %d", version, STOKE_STATE_VERSION);
  memset(out, 0, sizeof *out);
  out->version = version;
  uint32_t flags = stoke__le32(p + 12);
  out->shuffle = (flags & FLAG_BLOCK)     ? STOKE_SHUFFLE_BLOCK
                 : (flags & FLAG_SHUFFLE) ? STOKE_SHUFFLE_UNIFORM
                                          : STOKE_SHUFFLE_NONE;
  out->drop_last = (flags & FLAG_DROP_LAST) != 0;
  out->shard_drop_last = (flags & FLAG_SHARD_DROP_LAST) != 0;
  out->seed = stoke__le64(p + 16);
  out->epoch = stoke__le64(p + 24);
  out->batches_done = stoke__le64(p + 32);
  out->n_samples = stoke__le64(p + 40);
  out->fingerprint = stoke__le64(p + 48);
  out->batch_size = stoke__le64(p + 56);
  out->rank = stoke__le32(p + 64);
  out->world = stoke__le32(p + 68);
  out->order_key = stoke__le32(p + 72);
  return 0;
}
