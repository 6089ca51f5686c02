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
** step now and the ratio. */
#include "internal.h"
#include "model.h"
#include "tune/knee.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The knee's tolerance: the tuner's (one definition, src/tune/knee.h). */
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

static double ms(int64_t ns) { return (double)ns / 1e6; }

typedef struct ladder {
  stoke_advice *out;
  size_t cap, n;
  int64_t now;
} ladder;

static stoke_advice *add(ladder *l, int kind, int64_t predicted) {
  if (l->n >= l->cap) return NULL;
  stoke_advice *a = &l->out[l->n++];
  memset(a, 0, sizeof *a);
  a->kind = kind;
  a->now_step_ns = l->now;
  a->predicted_step_ns = predicted;
  a->speedup = predicted > 0 ? (double)l->now / (double)predicted : 0.0;
  return a;
}

/* "pageable memory: pin it", with the step it predicts. */
static void pin_it(ladder *l, const stoke_stats *st, int64_t predicted) {
  stoke_advice *a = add(l, STOKE_ADVICE_PIN_COPY, predicted);
  if (a)
    snprintf(a->text, sizeof a->text,
             "pageable memory: pin it (pin_memory 1, --pin-memory): %llu "
             "copies to the device came from pageable memory, which the "
             "driver copies synchronously through a staging buffer (%.2f ms "
             "a batch)", (unsigned long long)st->pageable_copies,
             ms(st->stage[STOKE_STAGE_COPY].mean_ns));
}

/* The knee over W in [1, w_max] at prefetch k: the tuner's own rule and
** tolerance (stoke_tune_knee_model, src/tune/knee.c) on the model's
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

static const char *stage_remedy(int stage) {
  switch (stage) {
  case STOKE_STAGE_PYTHON:
  case STOKE_STAGE_GIL_WAIT:
    return "fewer Python operations per sample, or C transforms";
  case STOKE_STAGE_COLLATE:
    return "smaller samples, or collate fewer objects in Python";
  case STOKE_STAGE_READ:
    return "pack samples into shards or a faster storage layout";
  case STOKE_STAGE_DECODE:
    /* Packed shards' JPEGs decode a crop from its own restart intervals:
    ** 1.3-1.4x less decode time than region decoding (bench/ images). */
    return "pack the images with `stoke pack` (crops then decode from "
           "their own restart intervals), or pre-resize them";
  default: return "cheaper or fused transforms";
  }
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
  snprintf(a->text, sizeof a->text,
           "oversubscribed: %u workers run %u threads on %.0f cores (a "
           "threaded library: torch intra-op, OpenMP, BLAS), waiting for a "
           "core %.0f%% of their run time; one thread per worker "
           "(OMP_NUM_THREADS=1): step %.2f ms (now %.2f ms), %.2fx",
           m->n_workers, m->threads_seen, p, 100 * m->run_delay_frac, ms(s),
           ms(now), a->speedup);
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
  if ((a = add_worth(l, STOKE_ADVICE_C_TRANSFORMS, knee_step, w, k)))
    snprintf(a->text, sizeof a->text,
             "move decode and transforms out of Python into stoke's C "
             "transforms (stoke.Loader(path, transform=...)), which run "
             "without the GIL: with -j %u predicted step %.2f ms or less "
             "(now %.2f ms), %.1fx",
             w, ms(knee_step), ms(l->now), a->speedup);
  stoke_model half = *m;
  half.t_gil_ns = m->t_gil_ns / 2;
  half.t_cpu_ns -= m->t_gil_ns / 2;
  half.t_d_ns -= m->t_gil_ns / 2;
  if (half.t_cpu_ns < 0) half.t_cpu_ns = 0;
  int64_t s = step_of(&half, m->n_workers, k);
  if ((a = add_worth(l, STOKE_ADVICE_PYTHON_OPS, s, m->n_workers, k)))
    snprintf(a->text, sizeof a->text,
             "fewer Python operations per sample (%.2f ms on a core each): "
             "vectorise with NumPy/torch calls, which release the GIL, "
             "precompute what does not change per epoch; at half, "
             "predicted step %.2f ms (now %.2f ms), %.2fx",
             ms(m->t_gil_ns), ms(s), ms(l->now), a->speedup);
  if ((a = add_worth(l, STOKE_ADVICE_PROCESSES, knee_step, w, k)))
    snprintf(a->text, sizeof a->text,
             "last resort, processes: %u worker processes (torch's "
             "DataLoader) run Python in parallel, at the cost of a copy of "
             "each batch and of the dataset per process: predicted step "
             "%.2f ms or less (now %.2f ms), %.1fx",
             w, ms(knee_step), ms(l->now), a->speedup);
  (void)st;
}

int stoke_advise_model(const stoke_model *m, const stoke_stats *st,
                       stoke_advice *out, size_t cap, size_t *n_out) {
  if (!m || !st || !n_out || (!out && cap)) return STOKE_EINVAL;
  *n_out = 0;
  stoke_diagnosis dg;
  int rc = stoke_diagnose(st, &dg);
  if (rc != 0) return rc;
  if (dg.verdict == STOKE_VERDICT_UNKNOWN || m->batch_size < 1) return 0;
  unsigned w = m->n_workers, k = m->prefetch ? m->prefetch : 1;
  ladder l = {out, cap, 0, step_of(m, w, k)};
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
    if ((a = add(&l, STOKE_ADVICE_MODEL, best)))
      snprintf(a->text, sizeof a->text,
               "the model is the cost: the step computes %.2f ms and waits "
               "%.1f%%; a faster pipeline gains at most %.2fx",
               ms(m->t_c_ns), 100 * st->wait_ratio, a->speedup);
    if (w > 1 && w_knee < w &&
        (double)step_of(m, w_knee, k) <= (double)l.now * (1 + KNEE_TOL) &&
        (a = add(&l, STOKE_ADVICE_FEWER, step_of(m, w_knee, k)))) {
      a->n_workers = w_knee;
      a->prefetch = k;
      snprintf(a->text, sizeof a->text,
               "-j %u is enough: predicted step %.2f ms (now %.2f ms); %u "
               "workers keep up and free %u threads",
               w_knee, ms(a->predicted_step_ns), ms(l.now), w_knee,
               w - w_knee);
    }
    /* Hidden or not, a pageable copy is synchronous: it holds the copy
    ** thread and goes through the driver's staging buffer. */
    if (st->pageable_copies > 0) pin_it(&l, st, l.now);
    *n_out = l.n;
    return 0;
  }

  advise_threads(&l, m, st, k);
  if (dg.verdict == STOKE_VERDICT_PYTHON ||
      (dg.verdict == STOKE_VERDICT_STARVING && m->t_gil_ns > 0)) {
    advise_python(&l, m, st, k, w_max);
    *n_out = l.n;
    return 0;
  }

  /* More workers, up to the knee. */
  unsigned w_adv = w;
  if (w_knee > w && (double)knee_step < (double)l.now * (1 - GAIN_MIN) &&
      (a = add(&l, STOKE_ADVICE_WORKERS, knee_step))) {
    a->n_workers = w_adv = w_knee;
    a->prefetch = k;
    int n = snprintf(a->text, sizeof a->text,
                     "-j %u: predicted step %.2f ms (now %.2f ms), %.1fx",
                     w_knee, ms(knee_step), ms(l.now), a->speedup);
    if (cpu_frac > 0.5 && n > 0 && (size_t)n < sizeof a->text)
      snprintf(a->text + n, sizeof a->text - (size_t)n,
               "; CPU-bound (%.0f%% of a sample on a core): past %.0f cores "
               "more workers do not help",
               100 * cpu_frac, p);
  } else if (w > p && cpu_bound && w_knee < w &&
             (double)step_of(m, w_knee, k) <= (double)l.now * (1 + KNEE_TOL) &&
             (a = add(&l, STOKE_ADVICE_FEWER, step_of(m, w_knee, k)))) {
    /* Oversubscribed CPU-bound work: same step with fewer threads. */
    a->n_workers = w_adv = w_knee;
    a->prefetch = k;
    snprintf(a->text, sizeof a->text,
             "oversubscribed: %u workers on %.0f cores for CPU-bound samples "
             "(%.0f%% on a core); -j %u predicts the same step (%.2f ms, now "
             "%.2f ms)",
             w, p, 100 * cpu_frac, w_knee, ms(a->predicted_step_ns),
             ms(l.now));
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
      snprintf(a->text, sizeof a->text,
               "--prefetch %u%s: predicted step %.2f ms (now %.2f ms), "
               "%.2fx; deeper prefetch absorbs the spread of the sample "
               "cost (sigma %.2f), not its mean",
               k_best, w_adv != w ? " with that -j" : "", ms(s_best),
               ms(l.now), a->speedup, m->sigma);
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
      snprintf(a->text, sizeof a->text,
               "the copy is longer than the step (%.2f ms against %.2f ms): "
               "no prefetch depth hides it; copy fewer bytes (u8 images "
               "normalised on the device, a smaller dtype); hidden, "
               "predicted step %.2f ms (now %.2f ms)",
               ms(copy->mean_ns), ms(m->t_c_ns), ms(s), ms(l.now));
    } else if (st->backend == STOKE_BACKEND_CUDA && gain &&
               (a = add(&l, STOKE_ADVICE_DEVICE_PREFETCH, s))) {
      a->n_workers = w_adv;
      a->prefetch = k;
      a->device_prefetch = st->device_prefetch + 1;
      snprintf(a->text, sizeof a->text,
               "the copy is exposed: the stream waits %.2f ms a step for it "
               "(%.0f%% of the %.2f ms copy); raise the prefetch-to-device "
               "depth (--device-prefetch %u): predicted step %.2f ms (now "
               "%.2f ms), %.2fx",
               ms(m->copy_ns), 100 * (1 - st->copy_overlap),
               ms(copy->mean_ns), a->device_prefetch, ms(s), ms(l.now),
               a->speedup);
    } else if (st->backend != STOKE_BACKEND_CUDA && gain &&
               (a = add(&l, STOKE_ADVICE_PIN_COPY, s)))
      snprintf(a->text, sizeof a->text,
               "pinned memory and asynchronous copies: the copy takes %.2f ms "
               "per batch; overlapped, predicted step %.2f ms (now %.2f ms), "
               "%.2fx",
               ms(m->copy_ns), ms(s), ms(l.now), a->speedup);
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
      snprintf(a->text, sizeof a->text,
               "cheaper %s (%.2f ms of %.2f ms per sample): %s; at half the "
               "cost, predicted step %.2f ms (now %.2f ms), %.2fx",
               stoke_stage_name(top), ms(m->stage_ns[top]), ms(m->t_d_ns),
               stage_remedy(top), ms(s), ms(l.now), a->speedup);
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
      snprintf(a->text, sizeof a->text,
               "pre-resize once: stoke pack DATA -o OUT --max-side %u: the "
               "images average %.1f MP (longer side %.0f px) and the "
               "transform keeps %u px; decoding %.1f%% of the pixels "
               "(%.2f ms of %.2f ms a sample now), predicted step %.2f ms "
               "(now %.2f ms), %.2fx",
               keep, st->image_pixels_mean / 1e6, st->image_side_mean, keep,
               100 * r, ms(m->stage_ns[STOKE_STAGE_DECODE]), ms(m->t_d_ns),
               ms(s), ms(l.now), a->speedup);
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
      snprintf(a->text, sizeof a->text,
               "last resort, data echoing: --echo %u (Loader(echo=%u)): "
               "even with every core the producer needs %.2f ms per batch "
               "against a %.2f ms step; using each batch %u times predicts "
               "%.2f ms per step (now %.2f ms), %.2fx",
               a->echo, a->echo, ms(prod_best), ms(tc), a->echo, ms(s),
               ms(l.now), a->speedup);
    }
  }
  *n_out = l.n;
  return 0;
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
