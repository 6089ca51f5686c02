/* advise.c — the escalation ladder, each rung priced by the queue model.
**
** The rungs, cheapest first (docs/diagnosis.md):
**   busy       the model is the cost; a faster pipeline gains only the wait
**              (and fewer workers would do, when the run has more than the
**              knee);
**   workers    more workers up to the knee: the tuner's knee (src/tune/
**              knee.c: the fewest workers within its tolerance of the best
**              throughput any W reaches, busy where any such W is) of the
**              model's predictions, never counting on more than the cores
**              for the CPU share;
**   fewer      oversubscribed: more workers than cores on CPU-bound work
**              cost memory and switches and buy nothing;
**   prefetch   deeper prefetch when slots cap the workers in flight or the
**              per-sample spread makes steps wait (variance);
**   pin/copy   a measured copy on the critical path: copies from pageable
**              memory are synchronous (pin it); with the device stage, a
**              copy the stream waits for is exposed (copy further ahead),
**              unless it is longer than the step (copy fewer bytes);
**              without it, pinned memory and asynchronous copies overlap
**              it;
**   cheaper    when even the knee leaves the producer slower than the
**              consumer: make the dominant stage cheaper;
**   presize    decoding dominates and the stored images are much larger
**              than the transform keeps: stoke pack --max-side, priced
**              from the pixels saved;
**   echo       when even all cores cannot keep up: reuse each batch e times
**              (data echoing), the last resort since it changes training.
** Two more, since 0.2:
**   threads    the workers started helper threads (a threaded library
**              inside the samples: torch's intra-op pool, OpenMP, BLAS)
**              that queue for the cores: one thread per worker;
**   python     a python-bound run (the GIL serialises the samples' Python)
**              gets its own ladder instead of more workers: the work into C
**              transforms that release the GIL, fewer Python operations per
**              sample, and processes as the last resort.
** Every line names the setting, the step the model predicts with it, the
** step now and the ratio.  The ladder is structure: each rung's action,
** the settings it proposes and the numbers it rests on
** (stoke_advice_basis); advice_text.c writes the line, in the library's
** words or a front end's. */
#include "core/core.h"
#include "model/knee.h"
#include "model/model.h"

#include <math.h>
#include <string.h>

/* The knee's tolerance: the tuner's (one definition, src/model/knee.h). */
#define KNEE_TOL STOKE_TUNE_TOLERANCE
#define GAIN_MIN 0.05 /* advice must buy at least 5% */

static const unsigned worker_steps[] = {1,  2,  3,  4,  6,  8,   12,  16,
                                        24, 32, 48, 64, 96, 128, 192, 256};
static const unsigned prefetch_steps[] = {1, 2, 3, 4, 6, 8, 12, 16, 32};
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int64_t step_of(const stoke_model *m, unsigned w, unsigned k) {
  stoke_prediction p;
  if (stoke_predict_step(m, w, k, &p) != 0) return INT64_MAX;
  return p.step_ns;
}


typedef struct ladder {
  stoke_advice *out;
  stoke_advice_basis *basis; /* out's numbers, one for one */
  size_t cap, n;
  int64_t now;
} ladder;

static stoke_advice *add(ladder *l, int kind, int64_t predicted) {
  if (l->n >= l->cap) return NULL;
  memset(&l->basis[l->n], 0, sizeof l->basis[l->n]);
  stoke_advice *a = &l->out[l->n++];
  memset(a, 0, sizeof *a);
  a->kind = kind;
  a->now_step_ns = l->now;
  a->predicted_step_ns = predicted;
  a->speedup = predicted > 0 ? (double)l->now / (double)predicted : 0.0;
  return a;
}

/* The numbers behind advice a, which add() returned. */
static stoke_advice_basis *basis_of(ladder *l, const stoke_advice *a) {
  return &l->basis[a - l->out];
}

/* "pageable memory: pin it", with the step it predicts. */
static void pin_it(ladder *l, const stoke_stats *st, int64_t predicted) {
  stoke_advice *a = add(l, STOKE_ADVICE_PIN_COPY, predicted);
  if (a) {
    stoke_advice_basis *b = basis_of(l, a);
    b->variant = 0;
    b->pageable_copies = st->pageable_copies;
    b->copy_mean_ns = st->stage[STOKE_STAGE_COPY].mean_ns;
  }
}

/* The knee over W in [1, w_max] at prefetch k: the tuner's own rule and
** tolerance (stoke_tune_knee_model, src/model/knee.c) on the model's
** predictions, so that advice and `stoke tune` never disagree on what the
** knee is. */
static unsigned knee(const stoke_model *m, unsigned k, unsigned w_max,
                     int64_t *step) {
  stoke_tune_point q;
  if (w_max < 1) w_max = 1;
  if (stoke_tune_knee_model(m, k, 1, w_max, KNEE_TOL, &q, NULL) != 0 ||
      q.n_workers < 1) {
    stoke__clear_tls_error();
    *step = step_of(m, 1, k);
    return 1;
  }
  *step = step_of(m, q.n_workers, k);
  return q.n_workers;
}

/* The measured step (wait + compute per step). */
static int64_t measured_step(const stoke_stats *st) {
  return st->steps ? (st->wait.total_ns + st->compute.total_ns) /
                         (int64_t)st->steps
                   : 0;
}

/* Helper threads queueing for the cores: more threads named stoke-w* than
** workers (a thread inherits its creator's name), more than the cores, and
** their run delay a real share of their run time. */
static void advise_threads(ladder *l, const stoke_model *m,
                           const stoke_stats *st, unsigned k) {
  double p = stoke__model_cores_avail(m);
  if (m->threads_seen <= m->n_workers || (double)m->threads_seen <= p ||
      m->run_delay_frac < 0.25)
    return;
  /* The run delay that external_cpu reads as other work is the helper
  ** threads' own here: one thread per worker removes it. */
  stoke_model alone = *m;
  alone.external_cpu = 0;
  int64_t now = measured_step(st), s = step_of(&alone, m->n_workers, k);
  if (now <= 0 || (double)s >= (double)now * (1 - GAIN_MIN)) return;
  int64_t keep = l->now;
  l->now = now;
  stoke_advice *a = add(l, STOKE_ADVICE_THREADS, s);
  l->now = keep;
  if (!a) return;
  a->n_workers = m->n_workers;
  a->prefetch = k;
  stoke_advice_basis *b = basis_of(l, a);
  b->threads_seen = m->threads_seen;
  b->cores = p;
  b->run_delay_frac = m->run_delay_frac;
}

/* A rung proposing W and K when its predicted step buys GAIN_MIN, else
** NULL. */
static stoke_advice *add_worth(ladder *l, int kind, int64_t predicted,
                               unsigned w, unsigned k) {
  if ((double)predicted >= (double)l->now * (1 - GAIN_MIN)) return NULL;
  stoke_advice *a = add(l, kind, predicted);
  if (a) {
    a->n_workers = w;
    a->prefetch = k;
  }
  return a;
}

/* A python-bound run: the GIL is the limit, so the ladder is about less
** Python, not more threads.  Each rung is priced by the model with the
** GIL's share changed: without it (C transforms, processes), the sample's
** CPU work runs on every core and its off-CPU time loses the measured wait
** for the GIL; with half the Python, t_gil and t_cpu lose half of t_gil. */
static void advise_python(ladder *l, const stoke_model *m,
                          const stoke_stats *st, unsigned k, unsigned w_max) {
  stoke_model free = *m;
  free.t_gil_ns = 0;
  free.t_io_ns -= m->stage_ns[STOKE_STAGE_GIL_WAIT];
  if (free.t_io_ns < 0) free.t_io_ns = 0;
  int64_t knee_step;
  unsigned w = knee(&free, k, w_max, &knee_step);
  if (w < 1) w = 1;
  stoke_advice *a;
  add_worth(l, STOKE_ADVICE_C_TRANSFORMS, knee_step, w, k);
  stoke_model half = *m;
  half.t_gil_ns = m->t_gil_ns / 2;
  half.t_cpu_ns -= m->t_gil_ns / 2;
  half.t_d_ns -= m->t_gil_ns / 2;
  if (half.t_cpu_ns < 0) half.t_cpu_ns = 0;
  int64_t s = step_of(&half, m->n_workers, k);
  if ((a = add_worth(l, STOKE_ADVICE_PYTHON_OPS, s, m->n_workers, k)))
    basis_of(l, a)->gil_ns = m->t_gil_ns;
  add_worth(l, STOKE_ADVICE_PROCESSES, knee_step, w, k);
  (void)st;
}

/* The ladder into l: its rungs and their numbers, no text. */
/* A saturated link (STOKE_FETCH_BANDWIDTH): more requests share the same
** bytes/s, so the rungs change the bytes.
**   cache    --cache DIR: after the first epoch (which fetches each shard
**            whole, at about the rate measured) the shards are local; the
**            model's step with the read stage gone (a local shard's read
**            taken as free) is the prediction;
**   presize  stoke pack --max-side: stored images larger than the
**            transform keeps carry bytes it throws away; a JPEG's bytes
**            taken as proportional to its pixels, a step then needs
**            r x its bytes at the measured bytes/s (r the pixels kept),
**            the rest of the step as it is. */
static void advise_bandwidth(ladder *l, const stoke_model *m,
                             const stoke_stats *st,
                             const stoke_fetch_diagnosis *fd, unsigned k) {
  int64_t now = (int64_t)(fd->step_ms * 1e6);
  double batch = st->steps ? (double)st->samples / (double)st->steps : 0;
  stoke_model local = *m;
  int64_t read_ns = m->stage_ns[STOKE_STAGE_READ];
  local.stage_ns[STOKE_STAGE_READ] = 0;
  local.t_d_ns = m->t_d_ns > read_ns ? m->t_d_ns - read_ns : 0;
  local.t_io_ns = m->t_io_ns > read_ns ? m->t_io_ns - read_ns : 0;
  int64_t local_step = step_of(&local, m->n_workers, k);
  int64_t keep_now = l->now;
  l->now = now; /* the lines compare measured steps, as the fetch's do */
  stoke_advice *cands[2] = {NULL, NULL};
  if (local_step < INT64_MAX &&
      (double)local_step < (double)now * (1 - GAIN_MIN))
    cands[0] = add(l, STOKE_ADVICE_REMOTE_CACHE, local_step);
  unsigned side = st->image_keep_side;
  if (st->images > 0 && side > 0 && st->image_side_mean > side) {
    double r = (double)side / st->image_side_mean;
    r *= r;
    double link_ms = fd->link_step_ms * r;
    double other_ms = fd->step_ms - fd->link_step_ms;
    if (other_ms < 0) other_ms = 0;
    int64_t s = (int64_t)((link_ms + other_ms) * 1e6);
    if (s < local_step) s = local_step;
    if ((double)s < (double)now * (1 - GAIN_MIN) &&
        (cands[1] = add(l, STOKE_ADVICE_PRESIZE, s))) {
      cands[1]->max_side = side;
      stoke_advice_basis *b = basis_of(l, cands[1]);
      b->variant = 1;
      b->image_side_mean = st->image_side_mean;
      b->pixels_kept_frac = r;
    }
  }
  l->now = keep_now;
  for (int i = 0; i < 2; i++) {
    stoke_advice *a = cands[i];
    if (!a) continue;
    a->n_workers = st->n_workers;
    a->prefetch = k;
    stoke_advice_basis *b = basis_of(l, a);
    b->run_workers = st->n_workers;
    b->fetch_bytes_per_s = st->fetch_bytes_per_s;
    b->fetch_bytes_per_sample = batch > 0 ? fd->bytes_per_step / batch : 0;
    b->fetch_body_frac = fd->body_frac;
    b->fetch_link_step_ms = fd->link_step_ms;
    b->fetch_in_flight = st->fetch_in_flight;
    b->run_io_concurrency = st->io_concurrency;
  }
}

/* Remote shards whose fetch holds the run back (stoke_fetch_diagnose):
** fewer requests when the server throttles, more when latency, not the
** workers, is what the steps wait for, and fewer bytes when the link's
** rate is. */
static int advise_fetch(ladder *l, const stoke_model *m,
                        const stoke_stats *st, unsigned k) {
  stoke_fetch_diagnosis fd;
  if (stoke_fetch_diagnose(st, &fd) != 0 || fd.verdict == STOKE_FETCH_NONE)
    return STOKE_FETCH_NONE;
  if (fd.verdict == STOKE_FETCH_BANDWIDTH) {
    advise_bandwidth(l, m, st, &fd, k);
    return fd.verdict;
  }
  stoke_advice *a = NULL;
  if (fd.verdict == STOKE_FETCH_THROTTLED)
    a = add(l, STOKE_ADVICE_FEWER_CONNECTIONS, l->now);
  else if (fd.verdict == STOKE_FETCH_LATENCY)
    a = add(l, STOKE_ADVICE_IO_CONCURRENCY,
            (int64_t)(fd.predicted_step_ms * 1e6));
  if (!a) return fd.verdict;
  a->io_concurrency = fd.io_concurrency;
  /* Each worker holds one request at a time: where the workers are the
  ** readers (no more in flight than them: no block read-ahead), as many
  ** workers as requests. */
  a->n_workers = st->n_workers;
  if (fd.verdict == STOKE_FETCH_LATENCY &&
      st->fetch_in_flight <= st->n_workers + 0.5 &&
      st->n_workers < fd.io_concurrency)
    a->n_workers = fd.io_concurrency;
  /* The model's step is not the fetch's: the line compares measured steps. */
  a->now_step_ns = (int64_t)(fd.step_ms * 1e6);
  a->speedup = a->predicted_step_ns > 0
                   ? (double)a->now_step_ns / (double)a->predicted_step_ns
                   : 0.0;
  stoke_advice_basis *b = basis_of(l, a);
  b->fetch_latency_ms = st->fetch_latency_p50_ms;
  b->fetch_requests_per_step = fd.requests_per_step;
  b->fetch_in_flight = st->fetch_in_flight;
  b->fetch_step_ms = fd.fetch_step_ms;
  b->fetch_throttled_frac = fd.throttled_frac;
  b->run_io_concurrency = st->io_concurrency;
  return fd.verdict;
}

static int climb(ladder *lp, const stoke_model *m, const stoke_stats *st) {
  ladder l = *lp;
  stoke_diagnosis dg;
  int rc = stoke_diagnose(st, &dg);
  if (rc != 0) return rc;
  if (dg.verdict == STOKE_VERDICT_UNKNOWN || m->batch_size < 1) return 0;
  unsigned w = m->n_workers, k = m->prefetch ? m->prefetch : 1;
  l.now = step_of(m, w, k);
  int64_t tc = m->t_c_ns + m->copy_ns;
  double p = stoke__model_cores_avail(m);
  unsigned w_max = stoke_tune_knee_w_max(m);
  int64_t knee_step;
  unsigned w_knee = knee(m, k, w_max, &knee_step);
  double cpu_frac =
      m->t_d_ns > 0 ? (double)m->t_cpu_ns / (double)m->t_d_ns : 0.0;
  bool cpu_bound = m->t_cpu_ns > 0 && (double)m->t_cpu_ns * (double)w >
                                          p * (double)(m->t_cpu_ns + m->t_io_ns);
  stoke_advice *a;

  if (dg.verdict == STOKE_VERDICT_BUSY) {
    int64_t best = tc > 0 ? tc : 1;
    if ((a = add(&l, STOKE_ADVICE_MODEL, best))) {
      basis_of(&l, a)->compute_ns = m->t_c_ns;
      basis_of(&l, a)->wait_ratio = st->wait_ratio;
    }
    if (w > 1 && w_knee < w &&
        (double)step_of(m, w_knee, k) <= (double)l.now * (1 + KNEE_TOL) &&
        (a = add(&l, STOKE_ADVICE_FEWER, step_of(m, w_knee, k)))) {
      a->n_workers = w_knee;
      a->prefetch = k;
      basis_of(&l, a)->variant = 0;
    }
    /* Hidden or not, a pageable copy is synchronous: it holds the copy
    ** thread and goes through the driver's staging buffer. */
    if (st->pageable_copies > 0) pin_it(&l, st, l.now);
    lp->n = l.n;
    return 0;
  }

  advise_threads(&l, m, st, k);
  if (dg.verdict == STOKE_VERDICT_PYTHON ||
      (dg.verdict == STOKE_VERDICT_STARVING && m->t_gil_ns > 0)) {
    advise_python(&l, m, st, k, w_max);
    lp->n = l.n;
    return 0;
  }

  /* A saturated link: more workers are more requests sharing its rate,
  ** which the queue model, reading the fetch as a wait per sample, does
  ** not know; the bandwidth rungs stand instead. */
  bool saturated = advise_fetch(&l, m, st, k) == STOKE_FETCH_BANDWIDTH;

  /* More workers, up to the knee. */
  unsigned w_adv = w;
  if (!saturated && w_knee > w &&
      (double)knee_step < (double)l.now * (1 - GAIN_MIN) &&
      (a = add(&l, STOKE_ADVICE_WORKERS, knee_step))) {
    a->n_workers = w_adv = w_knee;
    a->prefetch = k;
    basis_of(&l, a)->cpu_frac = cpu_frac;
    basis_of(&l, a)->cores = p;
  } else if (w > p && cpu_bound && w_knee < w &&
             (double)step_of(m, w_knee, k) <= (double)l.now * (1 + KNEE_TOL) &&
             (a = add(&l, STOKE_ADVICE_FEWER, step_of(m, w_knee, k)))) {
    /* Oversubscribed CPU-bound work: same step with fewer threads. */
    a->n_workers = w_adv = w_knee;
    a->prefetch = k;
    stoke_advice_basis *b = basis_of(&l, a);
    b->variant = 1;
    b->cores = p;
    b->cpu_frac = cpu_frac;
  }
  int64_t base = step_of(m, w_adv, k);

  /* Deeper prefetch: for the spread, or when the slots cap the workers. */
  if (w_adv > 0) {
    unsigned k_best = k;
    int64_t s_best = base, s_min = base;
    for (size_t i = 0; i < N_ELEMS(prefetch_steps); i++) {
      int64_t s = step_of(m, w_adv, prefetch_steps[i]);
      if (s < s_min) s_min = s;
    }
    for (size_t i = 0; i < N_ELEMS(prefetch_steps); i++) {
      unsigned kk = prefetch_steps[i];
      int64_t s = step_of(m, w_adv, kk);
      if (kk > k && (double)s <= (double)s_min * (1 + KNEE_TOL / 2)) {
        k_best = kk;
        s_best = s;
        break;
      }
    }
    bool worth = (double)s_best < (double)base * (1 - GAIN_MIN);
    if (k_best > k && (worth || dg.verdict == STOKE_VERDICT_VARIANCE) &&
        (a = add(&l, STOKE_ADVICE_PREFETCH, s_best))) {
      a->n_workers = w_adv;
      a->prefetch = k_best;
      basis_of(&l, a)->sigma = m->sigma;
      base = s_best;
      k = k_best;
    }
  }

  /* A measured copy on the critical path. */
  if (m->copy_ns > 0 || st->pageable_copies > 0) {
    stoke_model mm = *m;
    mm.copy_ns = 0;
    int64_t s = step_of(&mm, w_adv, k);
    bool gain = (double)s < (double)base * (1 - GAIN_MIN);
    const stoke_dist *copy = &st->stage[STOKE_STAGE_COPY];
    if (st->pageable_copies > 0)
      pin_it(&l, st, gain ? s : l.now);
    else if (st->backend == STOKE_BACKEND_CUDA && gain &&
             copy->mean_ns >= m->t_c_ns && m->t_c_ns > 0 &&
             (a = add(&l, STOKE_ADVICE_CHEAPER, s))) {
      a->stage = STOKE_STAGE_COPY;
      stoke_advice_basis *b = basis_of(&l, a);
      b->variant = 1;
      b->copy_mean_ns = copy->mean_ns;
      b->compute_ns = m->t_c_ns;
    } else if (st->backend == STOKE_BACKEND_CUDA && gain &&
               (a = add(&l, STOKE_ADVICE_DEVICE_PREFETCH, s))) {
      a->n_workers = w_adv;
      a->prefetch = k;
      a->device_prefetch = st->device_prefetch + 1;
      stoke_advice_basis *b = basis_of(&l, a);
      b->copy_ns = m->copy_ns;
      b->copy_overlap = st->copy_overlap;
      b->copy_mean_ns = copy->mean_ns;
    } else if (st->backend != STOKE_BACKEND_CUDA && gain &&
               (a = add(&l, STOKE_ADVICE_PIN_COPY, s))) {
      basis_of(&l, a)->variant = 1;
      basis_of(&l, a)->copy_ns = m->copy_ns;
    }
  }

  /* Still producer-bound at the knee: cheaper samples, then echoing. */
  int64_t prod_best = INT64_MAX;
  for (size_t i = 0; i < N_ELEMS(worker_steps) && worker_steps[i] <= w_max;
       i++) {
    int64_t pb = stoke__model_producer_batch(m, worker_steps[i], k, NULL);
    if (pb < prod_best) prod_best = pb;
  }
  int64_t prod_adv = stoke__model_producer_batch(m, w_adv, k, NULL);
  if ((double)prod_adv > (double)tc * (1 + GAIN_MIN) && m->t_d_ns > 0) {
    int top = STOKE_STAGE_READ;
    for (int s = STOKE_STAGE_DECODE; s < STOKE_STAGE_COUNT; s++)
      if (stoke__stage_is_work(s) && m->stage_ns[s] > m->stage_ns[top])
        top = s;
    double keep = 1.0 - 0.5 * (double)m->stage_ns[top] / (double)m->t_d_ns;
    if (keep < 0.5) keep = 0.5;
    stoke_model mm = *m;
    mm.t_d_ns = (int64_t)((double)m->t_d_ns * keep);
    mm.t_cpu_ns = (int64_t)((double)m->t_cpu_ns * keep);
    mm.t_io_ns = (int64_t)((double)m->t_io_ns * keep);
    mm.stage_ns[top] /= 2;
    int64_t s = step_of(&mm, w_adv, k);
    if ((double)s < (double)base * (1 - GAIN_MIN) &&
        (a = add(&l, STOKE_ADVICE_CHEAPER, s))) {
      a->stage = top;
      a->n_workers = w_adv;
      a->prefetch = k;
      basis_of(&l, a)->stage_ns = m->stage_ns[top];
      basis_of(&l, a)->sample_ns = m->t_d_ns;
    }
  }
  /* Decoding dominates and the stored images are far larger than the
  ** transform keeps: pre-resize them once (stoke pack --max-side).  The
  ** decode is taken as proportional to the pixels it reads, so the gain is
  ** priced from the pixels saved. */
  unsigned keep = st->image_keep_side;
  if ((double)prod_adv > (double)tc * (1 + GAIN_MIN) && m->t_d_ns > 0 &&
      st->images > 0 && keep > 0 && st->image_side_mean >= 2.0 * keep &&
      m->stage_ns[STOKE_STAGE_DECODE] >= m->stage_ns[STOKE_STAGE_READ] &&
      m->stage_ns[STOKE_STAGE_DECODE] >= m->stage_ns[STOKE_STAGE_TRANSFORM]) {
    double r = (double)keep / st->image_side_mean;
    r *= r; /* the pixels left */
    double saved = (double)m->stage_ns[STOKE_STAGE_DECODE] * (1 - r);
    stoke_model mm = *m;
    mm.stage_ns[STOKE_STAGE_DECODE] -= (int64_t)saved;
    mm.t_d_ns -= (int64_t)saved;
    mm.t_cpu_ns = (int64_t)((double)mm.t_cpu_ns * (double)mm.t_d_ns /
                            (double)m->t_d_ns);
    mm.t_io_ns = (int64_t)((double)mm.t_io_ns * (double)mm.t_d_ns /
                           (double)m->t_d_ns);
    int64_t s = step_of(&mm, w_adv, k);
    if ((double)s < (double)base * (1 - GAIN_MIN) &&
        (a = add(&l, STOKE_ADVICE_PRESIZE, s))) {
      a->stage = STOKE_STAGE_DECODE;
      a->max_side = keep;
      a->n_workers = w_adv;
      a->prefetch = k;
      stoke_advice_basis *b = basis_of(&l, a);
      b->image_pixels_mean = st->image_pixels_mean;
      b->image_side_mean = st->image_side_mean;
      b->pixels_kept_frac = r;
      b->stage_ns = m->stage_ns[STOKE_STAGE_DECODE];
      b->sample_ns = m->t_d_ns;
    }
  }
  if ((double)prod_best > (double)tc * (1 + GAIN_MIN) && tc > 0) {
    double e = ceil((double)prod_best / (double)tc);
    if (e > 16) e = 16;
    int64_t s = (int64_t)((double)prod_best / e);
    if (s < tc) s = tc;
    /* The model's times are per delivered sample: a run that echoes
    ** already needs e times its echo. */
    unsigned now_e = m->echo > 1 ? m->echo : 1;
    if ((a = add(&l, STOKE_ADVICE_ECHO, s))) {
      a->echo = (unsigned)e * now_e;
      a->n_workers = w_adv;
      a->prefetch = k;
      stoke_advice_basis *b = basis_of(&l, a);
      b->producer_batch_ns = prod_best;
      b->compute_ns = m->t_c_ns;
      b->copy_ns = m->copy_ns;
    }
  }
  lp->n = l.n;
  return 0;
}

int stoke_advise_basis(const stoke_model *m, const stoke_stats *st,
                       stoke_advice *out, stoke_advice_basis *basis,
                       size_t cap, size_t *n_out) {
  if (!m || !st || !n_out || ((!out || !basis) && cap)) return STOKE_EINVAL;
  *n_out = 0;
  ladder l = {out, basis, cap, 0, 0};
  int rc = climb(&l, m, st);
  if (rc != 0) return rc;
  unsigned k = m->prefetch ? m->prefetch : 1;
  for (size_t i = 0; i < l.n; i++) {
    /* What every rung shares: the run's W and K. */
    basis[i].run_workers = m->n_workers;
    basis[i].run_prefetch = k;
    stoke_advice_format(&out[i], &basis[i], NULL, out[i].text,
                        sizeof out[i].text);
  }
  *n_out = l.n;
  return 0;
}

int stoke_advise_model(const stoke_model *m, const stoke_stats *st,
                       stoke_advice *out, size_t cap, size_t *n_out) {
  if (!m || !st || !n_out || (!out && cap)) return STOKE_EINVAL;
  /* The ladder has fewer rungs than STOKE_MAX_ADVICE. */
  stoke_advice_basis basis[STOKE_MAX_ADVICE];
  return stoke_advise_basis(m, st, out, basis,
                            cap < STOKE_MAX_ADVICE ? cap : STOKE_MAX_ADVICE,
                            n_out);
}

int stoke_advise(const stoke_stats *st, const stoke_config *cfg,
                 unsigned cores, stoke_advice *out, size_t cap,
                 size_t *n_out) {
  if (!st || !n_out || (!out && cap)) return STOKE_EINVAL;
  *n_out = 0;
  stoke_model m;
  int rc = stoke_model_init(&m, st, cfg, cores);
  if (rc != 0) return rc;
  return stoke_advise_model(&m, st, out, cap, n_out);
}
