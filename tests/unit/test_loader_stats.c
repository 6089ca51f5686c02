/* test_loader_stats.c — what the statistics count, and the diagnosis.
**
** Counts (steps, samples, epochs, records, histogram totals) are exact.
** Durations are never compared with a bound; the two diagnosis runs are
** built so that the verdict holds by construction with a huge margin
** (a producer 20x slower than an idle consumer; an instant producer and a
** consumer sleeping 5 ms per step).
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>

#include "test_util.h"

/* Bytes of one tu_cb sample: idx 8 + rnd 16 + ep 8 + pat 16. */
#define CB_SAMPLE_BYTES 48

/* Invariants of any snapshot: histogram totals, shares, means. */
static void check_snapshot(const stoke_stats *st, unsigned K, unsigned W) {
  uint64_t hist = 0;
  double depth = 0;
  for (int d = 0; d < 16; d++) {
    hist += st->queue_depth_hist[d];
    depth += (double)d * (double)st->queue_depth_hist[d];
    if ((unsigned)d > K + 1)
      TU_CHECK(st->queue_depth_hist[d] == 0,
               "ready queue depth %d seen with K + 1 = %u slots", d, K + 1);
  }
  TU_CHECK(hist == st->steps, "queue_depth_hist sums to %llu, steps %llu",
           (unsigned long long)hist, (unsigned long long)st->steps);
  TU_CHECK(st->wait.count == st->steps, "wait.count %llu, steps %llu",
           (unsigned long long)st->wait.count, (unsigned long long)st->steps);
  if (st->steps) {
    double empty = (double)st->queue_depth_hist[0] / (double)st->steps;
    TU_CHECK(fabs(st->queue_empty_frac - empty) < 1e-9,
             "queue_empty_frac %f, histogram says %f", st->queue_empty_frac,
             empty);
    TU_CHECK(fabs(st->queue_mean_depth - depth / (double)st->steps) < 1e-9,
             "queue_mean_depth %f, histogram says %f", st->queue_mean_depth,
             depth / (double)st->steps);
    TU_CHECK(st->wait_ratio >= 0 && st->wait_ratio <= 1, "wait_ratio %f",
             st->wait_ratio);
  }
  if (W == 0)
    TU_CHECK(st->queue_depth_hist[0] == st->steps,
             "W = 0 fills on demand, yet %llu of %llu next() calls found a "
             "ready batch",
             (unsigned long long)(st->steps - st->queue_depth_hist[0]),
             (unsigned long long)st->steps);
  TU_CHECK(st->wait.total_ns >= 0 && st->compute.total_ns >= 0 &&
               st->wait.max_ns >= st->wait.p50_ns &&
               st->wait.p99_ns >= st->wait.p50_ns &&
               st->compute.max_ns >= st->compute.p50_ns,
           "inconsistent wait/compute distributions");
  for (int s = 0; s < STOKE_STAGE_COUNT; s++)
    TU_CHECK(st->stage[s].total_ns >= 0 && st->stage[s].max_ns >= 0,
             "stage %d negative", s);
}

static void test_names(void **state) {
  (void)state;
  assert_string_equal(stoke_stage_name(STOKE_STAGE_READ), "read");
  assert_string_equal(stoke_stage_name(STOKE_STAGE_DECODE), "decode");
  assert_string_equal(stoke_stage_name(STOKE_STAGE_TRANSFORM), "transform");
  assert_string_equal(stoke_stage_name(STOKE_STAGE_SLOT_WAIT), "slot_wait");
  assert_string_equal(stoke_stage_name(STOKE_STAGE_COPY), "copy");
  assert_non_null(stoke_stage_name(STOKE_STAGE_COUNT));
  assert_string_equal(stoke_verdict_name(STOKE_VERDICT_BUSY), "busy");
  assert_string_equal(stoke_verdict_name(STOKE_VERDICT_STARVING), "starving");
  assert_string_equal(stoke_verdict_name(STOKE_VERDICT_VARIANCE), "variance");
  assert_string_equal(stoke_verdict_name(STOKE_VERDICT_UNKNOWN), "unknown");
  assert_non_null(stoke_verdict_name(42));
}

static void test_stats_before_first_next(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(10);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 2, 2, 4);
  stoke_loader *l = tu_loader(&c);
  stoke_stats st = tu_stats(l);
  assert_int_equal(st.steps, 0);
  assert_int_equal(st.samples, 0);
  assert_int_equal(st.epochs_done, 0);
  assert_int_equal(st.bytes, 0);
  assert_int_equal(st.stage[STOKE_STAGE_READ].count, 0);
  check_snapshot(&st, 2, 2);
  assert_int_equal(stoke_loader_n_epoch_stats(l), 0);
  stoke_epoch_stats es;
  TU_RC_L(l, stoke_loader_epoch_stats(l, 0, &es), STOKE_EINVAL);
  stoke_diagnosis d;
  TU_OK(stoke_diagnose(&st, &d));
  assert_int_equal(d.verdict, STOKE_VERDICT_UNKNOWN);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* 30 samples in batches of 4: 8 batches (7 x 4 + 2) per epoch.  Three
** epochs, the first a warm-up.  Consumer-side counts are exact whatever
** prefetch_next_epoch; producer-side (reads) are checked with it off, where
** no sample of a later epoch is read before that epoch starts. */
static void stats_warmup_epochs(unsigned W, int pne) {
  const unsigned K = 2;
  tu_cb *cb = tu_cb_new(30);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, W, K, 4);
  c.warmup_epochs = 1;
  c.shuffle = 1;
  c.prefetch_next_epoch = pne;
  stoke_loader *l = tu_loader(&c);
  tu_epoch *e = tu_epoch_new();

  tu_epoch_ok(l, cb, e, 1);
  stoke_stats st = tu_stats(l);
  TU_CHECK(st.steps == 0 && st.samples == 0 && st.bytes == 0,
           "W %u: warm-up epoch counted: %llu steps %llu samples", W,
           (unsigned long long)st.steps, (unsigned long long)st.samples);
  assert_int_equal(st.epochs_done, 1);
  check_snapshot(&st, K, W);

  /* Half an epoch: counted as it goes, the epoch not done. */
  for (int i = 0; i < 3; i++) {
    stoke_batch *b;
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
    stoke_batch_release(b);
  }
  st = tu_stats(l);
  assert_int_equal(st.steps, 3);
  assert_int_equal(st.samples, 12);
  assert_int_equal(st.epochs_done, 1);
  assert_int_equal(stoke_loader_n_epoch_stats(l), 1);
  /* Destroy mid-epoch; count again on a fresh loader. */
  stoke_loader_destroy(l);

  l = tu_loader(&c);
  for (int ep = 0; ep < 3; ep++) tu_epoch_ok(l, cb, e, 1);
  st = tu_stats(l);
  TU_CHECK(st.steps == 16, "W %u: steps %llu, want 16 (2 measured epochs of "
           "8)", W, (unsigned long long)st.steps);
  TU_CHECK(st.samples == 60, "W %u: samples %llu, want 60", W,
           (unsigned long long)st.samples);
  assert_int_equal(st.epochs_done, 3);
  TU_CHECK(st.bytes == 60 * CB_SAMPLE_BYTES, "W %u: bytes %llu, want %d", W,
           (unsigned long long)st.bytes, 60 * CB_SAMPLE_BYTES);
  check_snapshot(&st, K, W);
  /* Producer side: every sample of the measured epochs was read once.  At
  ** W = 0 exactly; with workers the warm-up boundary may let a few warm-up
  ** reads in, never more than one epoch. */
  uint64_t reads = st.stage[STOKE_STAGE_READ].count;
  if (W == 0)
    TU_CHECK(reads == 60, "W 0: %llu reads counted, want 60",
             (unsigned long long)reads);
  else if (!pne)
    TU_CHECK(reads >= 60 && reads <= 90, "W %u: %llu reads, want 60..90", W,
             (unsigned long long)reads);
  else /* epoch 1 may be read during the warm-up, epoch 3 is under way */
    TU_CHECK(reads >= 30 && reads <= 120, "W %u pne: %llu reads, want "
             "30..120", W, (unsigned long long)reads);

  assert_int_equal(stoke_loader_n_epoch_stats(l), 3);
  for (size_t i = 0; i < 3; i++) {
    stoke_epoch_stats es;
    memset(&es, 0xee, sizeof es);
    TU_OK(stoke_loader_epoch_stats(l, i, &es));
    TU_CHECK(es.epoch == i, "record %zu: epoch %llu", i,
             (unsigned long long)es.epoch);
    TU_CHECK(es.warmup == (i == 0), "record %zu: warmup %d", i, es.warmup);
    TU_CHECK(es.batches == 8 && es.samples == 30,
             "record %zu: %llu batches %llu samples, want 8 and 30", i,
             (unsigned long long)es.batches, (unsigned long long)es.samples);
    TU_CHECK(es.wall_ns > 0 && es.wait_ns >= 0 && es.compute_ns >= 0,
             "record %zu: wall %lld wait %lld compute %lld", i,
             (long long)es.wall_ns, (long long)es.wait_ns,
             (long long)es.compute_ns);
  }
  stoke_epoch_stats es;
  TU_RC_L(l, stoke_loader_epoch_stats(l, 3, &es), STOKE_EINVAL);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
  free(e);
}

static void test_warmup_epochs_w0(void **state) {
  (void)state;
  stats_warmup_epochs(0, 0);
  stats_warmup_epochs(0, 1);
}

static void test_warmup_epochs_workers(void **state) {
  (void)state;
  stats_warmup_epochs(2, 0);
  stats_warmup_epochs(5, 0);
  stats_warmup_epochs(2, 1);
  stats_warmup_epochs(5, 1);
}

/* warmup_steps leaves out the first steps after the warm-up epochs. */
static void test_warmup_steps(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(30);
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *e = tu_epoch_new();
  for (unsigned W = 0; W <= 3; W += 3) {
    stoke_config c = tu_config(src, W, 2, 4);
    c.warmup_steps = 5;
    stoke_loader *l = tu_loader(&c);
    for (int ep = 0; ep < 2; ep++) tu_epoch_ok(l, cb, e, 1);
    stoke_stats st = tu_stats(l);
    TU_CHECK(st.steps == 11, "W %u warmup_steps 5: steps %llu, want 11", W,
             (unsigned long long)st.steps);
    TU_CHECK(st.samples == 40, "W %u: samples %llu, want 40", W,
             (unsigned long long)st.samples);
    assert_int_equal(st.epochs_done, 2);
    check_snapshot(&st, 2, W);
    stoke_loader_destroy(l);

    c.warmup_epochs = 1;
    c.warmup_steps = 3;
    l = tu_loader(&c);
    for (int ep = 0; ep < 3; ep++) tu_epoch_ok(l, cb, e, 1);
    st = tu_stats(l);
    TU_CHECK(st.steps == 13, "W %u 1 warm-up epoch + 3 steps: steps %llu, "
             "want 13", W, (unsigned long long)st.steps);
    TU_CHECK(st.samples == 48, "W %u: samples %llu, want 48", W,
             (unsigned long long)st.samples);
    assert_int_equal(st.epochs_done, 3);
    stoke_epoch_stats es;
    TU_OK(stoke_loader_epoch_stats(l, 0, &es));
    assert_int_equal(es.warmup, 1);
    TU_OK(stoke_loader_epoch_stats(l, 2, &es));
    assert_int_equal(es.warmup, 0);
    stoke_loader_destroy(l);
  }
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* The warm-up epoch's early end: after its first warmup_end_steps steps
** (no time asked), the rest of the epoch is measured; the record says so,
** and a negative time is refused. */
static void test_warmup_ends_early(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(30);
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *e = tu_epoch_new();
  for (unsigned W = 0; W <= 3; W += 3) {
    stoke_config c = tu_config(src, W, 2, 4);
    c.warmup_epochs = 1;
    c.warmup_end_steps = 3;
    c.warmup_end_ns = 0;
    stoke_loader *l = tu_loader(&c);
    for (int ep = 0; ep < 2; ep++) tu_epoch_ok(l, cb, e, 1);
    stoke_stats st = tu_stats(l);
    TU_CHECK(st.steps == 13, "W %u early end after 3 steps: steps %llu, "
             "want 13", W, (unsigned long long)st.steps);
    TU_CHECK(st.samples == 48, "W %u: samples %llu, want 48", W,
             (unsigned long long)st.samples);
    stoke_epoch_stats es;
    TU_OK(stoke_loader_epoch_stats(l, 0, &es));
    assert_int_equal(es.warmup, 2);
    TU_OK(stoke_loader_epoch_stats(l, 1, &es));
    assert_int_equal(es.warmup, 0);
    stoke_loader_destroy(l);
    c.warmup_end_ns = -1;
    l = NULL;
    TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
    TU_CONTAINS(stoke_errmsg(NULL), "warmup_end_ns");
  }
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* Claims: with max_chunk = 1 every claim is one sample (no next epoch
** prefetched, so every claim is of a delivered sample). */
static void test_chunks(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(64);
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *e = tu_epoch_new();
  const size_t chunk[] = {1, 4};
  for (size_t i = 0; i < 2; i++) {
    stoke_config c = tu_config(src, 3, 2, 8);
    c.max_chunk = chunk[i];
    c.prefetch_next_epoch = 0;
    stoke_loader *l = tu_loader(&c);
    for (int ep = 0; ep < 2; ep++) tu_epoch_ok(l, cb, e, 1);
    stoke_stats st = tu_stats(l);
    assert_int_equal(st.samples, 128);
    if (chunk[i] == 1)
      TU_CHECK(st.chunks == 128, "max_chunk 1: %llu claims for 128 samples",
               (unsigned long long)st.chunks);
    else
      TU_CHECK(st.chunks >= 32 && st.chunks <= 128,
               "max_chunk 4: %llu claims for 128 samples",
               (unsigned long long)st.chunks);
    TU_CHECK(st.worker_busy_ns >= 0 && st.worker_cpu_ns >= 0,
             "negative worker time");
    stoke_loader_destroy(l);
  }
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* stoke_loader_stats from another thread while the consumer runs. */
typedef struct poller {
  stoke_loader *l;
  atomic_int stop;
  atomic_int bad;
  atomic_long polls;
} poller;

static void *poll_stats(void *arg) {
  poller *p = arg;
  uint64_t last = 0;
  while (!atomic_load(&p->stop)) {
    stoke_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if (stoke_loader_stats(p->l, &st) != STOKE_OK) atomic_fetch_or(&p->bad, 1);
    if (st.steps < last) atomic_fetch_or(&p->bad, 2);
    if (st.samples < st.steps) atomic_fetch_or(&p->bad, 4);
    last = st.steps;
    atomic_fetch_add(&p->polls, 1);
  }
  return NULL;
}

static void test_stats_from_another_thread(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(64);
  cb->sleep_ns = 50000;
  cb->sleep_every = 3;
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 3, 2, 4);
  stoke_loader *l = tu_loader(&c);
  poller p;
  p.l = l;
  atomic_init(&p.stop, 0);
  atomic_init(&p.bad, 0);
  atomic_init(&p.polls, 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, poll_stats, &p), 0);
  tu_epoch *e = tu_epoch_new();
  for (int ep = 0; ep < 3; ep++) tu_epoch_ok(l, cb, e, 1);
  while (atomic_load(&p.polls) < 2) tu_sleep_ns(100000);
  atomic_store(&p.stop, 1);
  pthread_join(t, NULL);
  TU_CHECK(atomic_load(&p.bad) == 0, "concurrent stats reader saw 0x%x",
           atomic_load(&p.bad));
  stoke_stats st = tu_stats(l);
  assert_int_equal(st.steps, 48);
  stoke_loader_destroy(l);
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- diagnosis on measured runs ------------------------------------------- */

/* A slow producer: W = 0, every sample sleeps 2 ms (8 ms per batch of 4)
** and the consumer does nothing.  Every next() finds no ready batch and
** almost all the step is waiting. */
static void test_diagnose_starving(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(160);
  cb->sleep_ns = 2000000;
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 0, 2, 4);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
  TU_RC_L(l, rc, STOKE_END);
  stoke_stats st = tu_stats(l);
  assert_int_equal(st.steps, 40);
  check_snapshot(&st, 2, 0);
  TU_CHECK(st.queue_empty_frac == 1.0, "queue_empty_frac %f",
           st.queue_empty_frac);
  TU_CHECK(st.wait_ratio > 0.5, "wait_ratio %f with an idle consumer",
           st.wait_ratio);
  stoke_diagnosis d;
  memset(&d, 0, sizeof d);
  TU_OK(stoke_diagnose(&st, &d));
  TU_CHECK(d.verdict == STOKE_VERDICT_STARVING,
           "verdict %s, want starving (wait_ratio %f, empty %f): %s",
           stoke_verdict_name(d.verdict), d.wait_ratio, d.queue_empty_frac,
           d.reason);
  TU_CHECK(d.wait_ratio == st.wait_ratio &&
               d.queue_empty_frac == st.queue_empty_frac,
           "diagnosis numbers differ from the snapshot");
  TU_CHECK(strlen(d.reason) > 0 && strchr(d.reason, '\n') == NULL,
           "reason \"%s\" is not one line", d.reason);
  TU_CONTAINS(d.reason, "starving");
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* An instant producer (in-memory tensors, tiny samples) and a consumer that
** sleeps 5 ms per step: the wait is a tiny share. */
static void test_diagnose_busy(void **state) {
  (void)state;
  enum { N = 160 };
  static int64_t v[N];
  for (int i = 0; i < N; i++) v[i] = i;
  stoke_field_desc f = tu_field("v", STOKE_I64, 0, NULL);
  const void *d0[1] = {v};
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_tensors(N, 1, &f, d0, &src));
  stoke_config c = tu_config(src, 1, 2, 4);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    tu_sleep_ns(5000000);
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  stoke_stats st = tu_stats(l);
  assert_int_equal(st.steps, 40);
  check_snapshot(&st, 2, 1);
  TU_CHECK(st.compute.p50_ns >= 4000000, "compute p50 %lld ns with a 5 ms "
           "sleep per step", (long long)st.compute.p50_ns);
  stoke_diagnosis d;
  memset(&d, 0, sizeof d);
  TU_OK(stoke_diagnose(&st, &d));
  TU_CHECK(d.verdict == STOKE_VERDICT_BUSY,
           "verdict %s, want busy (wait_ratio %f, empty %f): %s",
           stoke_verdict_name(d.verdict), d.wait_ratio, d.queue_empty_frac,
           d.reason);
  TU_CONTAINS(d.reason, "busy");
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

/* ---- diagnosis on built snapshots ------------------------------------------ */

static stoke_dist dist(uint64_t n, int64_t mean, int64_t p50, int64_t p99) {
  stoke_dist d;
  d.count = n;
  d.total_ns = (int64_t)n * mean;
  d.mean_ns = mean;
  d.p50_ns = p50;
  d.p95_ns = p50 + (p99 - p50) / 2;
  d.p99_ns = p99;
  d.max_ns = p99 + p99 / 10;
  return d;
}

/* A snapshot of `steps` steps of batch 4 with the given clocks (ms). */
static stoke_stats snapshot(double wait_mean, double wait_p50,
                            double wait_p99, double compute, double empty,
                            double read_ms) {
  const uint64_t steps = 1000;
  const int64_t ms = 1000000;
  stoke_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  st.steps = steps;
  st.samples = steps * 4;
  st.epochs_done = 10;
  st.n_workers = 4; /* a queue exists: the verdict reads it */
  st.wait = dist(steps, (int64_t)(wait_mean * ms), (int64_t)(wait_p50 * ms),
                 (int64_t)(wait_p99 * ms));
  st.compute = dist(steps, (int64_t)(compute * ms), (int64_t)(compute * ms),
                    (int64_t)(compute * 1.2 * ms));
  st.wait_ratio = wait_mean / (wait_mean + compute);
  st.queue_empty_frac = empty;
  st.queue_depth_hist[0] = (uint64_t)(empty * steps);
  st.queue_depth_hist[2] = steps - st.queue_depth_hist[0];
  st.queue_mean_depth = 2.0 * (double)st.queue_depth_hist[2] / steps;
  st.stage[STOKE_STAGE_READ] =
      dist(st.samples, (int64_t)(read_ms * ms), (int64_t)(read_ms * ms),
           (int64_t)(read_ms * 3 * ms));
  st.worker_busy_ns = (int64_t)((double)st.samples * read_ms * ms);
  st.worker_cpu_ns = st.worker_busy_ns / 2;
  st.chunks = st.samples;
  st.bytes = st.samples * 1000;
  return st;
}

static void expect_verdict(const stoke_stats *st, int want, const char *what) {
  stoke_diagnosis d;
  memset(&d, 0, sizeof d);
  TU_OK(stoke_diagnose(st, &d));
  TU_CHECK(d.verdict == want, "%s: verdict %s, want %s (%s)", what,
           stoke_verdict_name(d.verdict), stoke_verdict_name(want), d.reason);
  TU_CHECK(fabs(d.wait_ratio - st->wait_ratio) < 1e-12 &&
               fabs(d.queue_empty_frac - st->queue_empty_frac) < 1e-12,
           "%s: diagnosis numbers differ from the snapshot", what);
  TU_CHECK(strlen(d.reason) > 0, "%s: empty reason", what);
}

static void test_diagnose_snapshots(void **state) {
  (void)state;
  /* Waiting 0.1 ms of 5.1 ms per step, queue rarely empty. */
  stoke_stats busy = snapshot(0.1, 0.05, 0.5, 5.0, 0.02, 0.01);
  expect_verdict(&busy, STOKE_VERDICT_BUSY, "busy snapshot");
  /* Waiting 20 of 25 ms, queue empty at 95 % of calls, reads 10 ms. */
  stoke_stats starving = snapshot(20.0, 20.0, 25.0, 5.0, 0.95, 10.0);
  expect_verdict(&starving, STOKE_VERDICT_STARVING, "starving snapshot");
  /* Mean keeps up (queue empty at 5 % of calls, median wait ~0) but the
  ** wait has a 100 ms p99 against a 5 ms step. */
  stoke_stats variance = snapshot(3.0, 0.01, 100.0, 5.0, 0.05, 1.0);
  expect_verdict(&variance, STOKE_VERDICT_VARIANCE, "variance snapshot");
  stoke_diagnosis d;
  TU_OK(stoke_diagnose(&variance, &d));
  TU_CHECK(d.tail_ratio > 10, "tail_ratio %f for p99 100 ms / step 5 ms",
           d.tail_ratio);
  /* No steps: unknown. */
  stoke_stats none;
  memset(&none, 0, sizeof none);
  none.struct_size = sizeof none;
  expect_verdict(&none, STOKE_VERDICT_UNKNOWN, "empty snapshot");
  TU_RC(stoke_diagnose(&busy, NULL), STOKE_EINVAL);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_stats_before_first_next),
      cmocka_unit_test(test_warmup_epochs_w0),
      cmocka_unit_test(test_warmup_epochs_workers),
      cmocka_unit_test(test_warmup_steps),
      cmocka_unit_test(test_warmup_ends_early),
      cmocka_unit_test(test_chunks),
      cmocka_unit_test(test_stats_from_another_thread),
      cmocka_unit_test(test_diagnose_starving),
      cmocka_unit_test(test_diagnose_busy),
      cmocka_unit_test(test_diagnose_snapshots),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
