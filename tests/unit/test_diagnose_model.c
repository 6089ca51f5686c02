/* test_diagnose_model.c — the queue model, the what-if prediction and the
** advice: the arithmetic on hand-made snapshots, then the verdict, the bound
** and the first advice on a few real runs whose costs differ by 10x or more
** (no timed assertion: noise cannot flip a 10x margin). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>
#include <time.h>

#include "stoke.h"
#include "test_util.h"

#define MS 1000000LL

/* snap(): tu_snap (test_util.h), shared with test_tune_knee.c. */
#define snap tu_snap

static void test_model_init_arithmetic(void **state) {
  (void)state;
  /* Waiting samples: 1 ms each, 10% on a core; 4 workers; 2 cores. */
  stoke_stats st = snap(4, 2, 1 * MS, 0.1, 2 * MS, 0.5, 0.9);
  stoke_model m;
  assert_int_equal(stoke_model_init(&m, &st, NULL, 2), 0);
  assert_int_equal(m.struct_size, sizeof m);
  assert_int_equal(m.batch_size, 8);
  assert_int_equal(m.n_workers, 4);
  assert_int_equal(m.prefetch, 2);
  assert_true(m.cores == 2.0);
  assert_int_equal(m.t_d_ns, 1 * MS);
  assert_int_equal(m.t_cpu_ns, MS / 10);
  /* A = busy / wall = 800 ms / 400 ms = 2 workers at once on 2 cores: no
  ** queueing for a core, so the off-CPU part is all of the rest. */
  assert_int_equal(m.t_io_ns, 9 * MS / 10);
  assert_int_equal(m.t_c_ns, 2 * MS);
  assert_int_equal(m.chunk, 1);
  assert_true(m.sigma == 0.0);
  assert_int_equal(m.stage_ns[STOKE_STAGE_READ], 1 * MS);

  /* The config's batch size wins over samples / steps. */
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.batch_size = 16;
  cfg.prefetch_next_epoch = 0;
  assert_int_equal(stoke_model_init(&m, &st, &cfg, 2), 0);
  assert_int_equal(m.batch_size, 16);
  assert_int_equal(m.prefetch_next_epoch, 0);

  /* Spinning samples on an oversubscribed machine: 8 workers busy all the
  ** time on 2 cores, each sample 1 ms of CPU seen as 4 ms of wall.  The
  ** stretch (A / P = 4) is queueing for a core, not waiting. */
  stoke_stats sp = snap(8, 2, 4 * MS, 0.25, 1 * MS, 0.9, 1.0);
  sp.wait.total_ns = 800 * 4 * MS / 8 - sp.compute.total_ns;
  assert_int_equal(stoke_model_init(&m, &sp, NULL, 2), 0);
  assert_int_equal(m.t_cpu_ns, 1 * MS);
  assert_int_equal(m.t_io_ns, 0);

  /* A spread: mean / median = e^(sigma^2 / 2). */
  stoke_stats ln = snap(4, 2, 1 * MS, 0.1, 2 * MS, 0.5, 0.9);
  ln.stage[STOKE_STAGE_READ].p50_ns = (int64_t)(1e6 / exp(0.5));
  assert_int_equal(stoke_model_init(&m, &ln, NULL, 2), 0);
  assert_true(fabs(m.sigma - 1.0) < 0.01);

  assert_int_equal(stoke_model_init(NULL, &st, NULL, 2), STOKE_EINVAL);
  assert_int_equal(stoke_model_init(&m, NULL, NULL, 2), STOKE_EINVAL);
  stoke_stats none = st;
  none.steps = 0;
  assert_int_equal(stoke_model_init(&m, &none, NULL, 2), STOKE_EINVAL);
}

/* A model by hand: B, t_cpu, t_io, t_c, cores; fixed costs, chunk 1. */
static stoke_model hand(size_t b, int64_t cpu, int64_t io, int64_t tc,
                        double cores) {
  stoke_model m;
  memset(&m, 0, sizeof m);
  m.struct_size = sizeof m;
  m.batch_size = b;
  m.n_workers = 1;
  m.prefetch = 2;
  m.cores = cores;
  m.t_cpu_ns = cpu;
  m.t_io_ns = io;
  m.t_d_ns = cpu + io;
  m.stage_ns[STOKE_STAGE_READ] = cpu + io;
  m.t_c_ns = tc;
  m.chunk = 1;
  m.prefetch_next_epoch = 1;
  return m;
}

static int near(int64_t got, int64_t want, double tol) {
  return fabs((double)got / (double)want - 1) <= tol;
}

static void test_predict_closed_form(void **state) {
  (void)state;
  stoke_prediction p;
  /* W = 0: nothing overlaps, step = B * t_d + t_c exactly. */
  stoke_model m = hand(8, 0, 1 * MS, 2 * MS, 2);
  m.n_batches = 10;
  assert_int_equal(stoke_predict_step(&m, 0, 2, &p), 0);
  assert_int_equal(p.step_ns, 10 * MS);
  assert_int_equal(p.epoch_ns, 100 * MS);
  assert_int_equal(p.bound, STOKE_BOUND_INLINE);
  assert_true(fabs(p.wait_ratio - 0.8) < 1e-9);

  /* Waiting samples: B * t_d / W, the cores do not limit. */
  assert_int_equal(stoke_predict_step(&m, 2, 2, &p), 0);
  assert_int_equal(p.producer_batch_ns, 4 * MS);
  assert_int_equal(p.bound, STOKE_BOUND_WORKERS);
  assert_true(near(p.step_ns, 4 * MS, 0.02));
  assert_int_equal(stoke_predict_step(&m, 8, 2, &p), 0);
  assert_int_equal(p.producer_batch_ns, 1 * MS);
  assert_int_equal(p.bound, STOKE_BOUND_CONSUMER);
  assert_true(near(p.step_ns, 2 * MS, 0.02));
  assert_true(p.wait_ratio < 0.01);

  /* CPU-bound samples: past the 2 cores more workers do not help. */
  stoke_model c = hand(8, 1 * MS, 0, MS / 10, 2);
  assert_int_equal(stoke_predict_step(&c, 2, 2, &p), 0);
  assert_int_equal(p.producer_batch_ns, 4 * MS);
  assert_int_equal(stoke_predict_step(&c, 16, 2, &p), 0);
  assert_int_equal(p.producer_batch_ns, 4 * MS);
  assert_int_equal(p.bound, STOKE_BOUND_CORES);
  assert_true(near(p.step_ns, 4 * MS, 0.02));
  /* A consumer that burns a core leaves one to the workers. */
  c.consumer_cpu = 1;
  assert_int_equal(stoke_predict_step(&c, 16, 2, &p), 0);
  assert_int_equal(p.producer_batch_ns, 8 * MS);

  /* Slots: K + 1 = 2 batches of 8 samples keep at most 16 workers busy. */
  stoke_model s = hand(8, 0, 1 * MS, MS / 10, 64);
  assert_int_equal(stoke_predict_step(&s, 32, 1, &p), 0);
  assert_int_equal(p.producer_batch_ns, MS / 2);
  assert_int_equal(p.bound, STOKE_BOUND_SLOTS);

  /* Pure and deterministic; bad arguments. */
  stoke_prediction q;
  stoke_model v = hand(8, 0, 1 * MS, 2 * MS, 2);
  v.sigma = 1.0;
  stoke_predict_step(&v, 4, 2, &p);
  stoke_predict_step(&v, 4, 2, &q);
  assert_memory_equal(&p, &q, sizeof p);
  /* The spread costs waits the mean cannot see; prefetch absorbs them. */
  stoke_prediction k1, k8;
  stoke_predict_step(&v, 8, 1, &k1);
  stoke_predict_step(&v, 8, 8, &k8);
  assert_true(k1.step_ns > k8.step_ns);
  assert_int_equal(stoke_predict_step(&v, 4, 0, &p), STOKE_EINVAL);
  assert_int_equal(stoke_predict_step(NULL, 4, 1, &p), STOKE_EINVAL);
  assert_int_equal(stoke_predict_step(&v, 4, 1, NULL), STOKE_EINVAL);
}

/* The simulation shares the cores as the OS does (processor sharing). */
static void test_predict_processor_sharing(void **state) {
  (void)state;
  stoke_prediction p;
  /* Mixed samples (1 ms CPU interleaved with 1 ms waiting) on 2 cores:
  ** 3 workers ask for 1.5 cores, so the latency bound holds exactly,
  ** B * t_d / W = 5.33 ms; 8 workers ask for 4, the cores bound it at
  ** B * t_cpu / P = 4 ms.  (Each sample running its CPU part, then its
  ** waiting, in lockstep would predict 6.67 and 5 ms.) */
  stoke_model x = hand(8, 1 * MS, 1 * MS, MS / 10, 2);
  x.n_batches = 16;
  assert_int_equal(stoke_predict_step(&x, 3, 8, &p), 0);
  assert_true(near(p.step_ns, 16 * MS / 3, 0.01));
  assert_int_equal(stoke_predict_step(&x, 8, 8, &p), 0);
  assert_true(near(p.step_ns, 4 * MS, 0.01));
  /* CPU-bound samples with a heavy tail on saturated cores: the cores stay
  ** busy while enough samples are in flight (a long sample speeds up as
  ** the others finish), so the step stays near B * t_cpu / P = 4 ms.
  ** Stretching every sample by W / P alike predicted 6.3 ms. */
  stoke_model c = hand(8, 1 * MS, 0, MS / 10, 2);
  c.n_batches = 16;
  c.sigma = 1.0;
  assert_int_equal(stoke_predict_step(&c, 16, 8, &p), 0);
  assert_true(p.step_ns >= 4 * MS * 0.97 && p.step_ns <= 4 * MS * 1.10);
}

static const stoke_advice *find(const stoke_advice *a, size_t n, int kind) {
  for (size_t i = 0; i < n; i++)
    if (a[i].kind == kind) return &a[i];
  return NULL;
}

static void test_advice_ladder(void **state) {
  (void)state;
  stoke_advice a[STOKE_MAX_ADVICE];
  size_t n;
  /* Starving on waiting samples: more workers, with the gain. */
  stoke_stats st = snap(1, 2, 1 * MS, 0.05, 1 * MS, 0.85, 1.0);
  assert_int_equal(stoke_advise(&st, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  assert_true(n >= 1);
  assert_int_equal(a[0].kind, STOKE_ADVICE_WORKERS);
  assert_true(a[0].n_workers >= 8 && a[0].n_workers <= 16);
  assert_true(a[0].speedup > 5);
  assert_non_null(strstr(a[0].text, "-j "));
  assert_non_null(strstr(a[0].text, "predicted step"));
  /* More workers keep up: no echoing, which changes training, and no
  ** cheaper samples. */
  assert_null(find(a, n, STOKE_ADVICE_ECHO));
  assert_null(find(a, n, STOKE_ADVICE_CHEAPER));

  /* Busy: the model is the cost. */
  stoke_stats busy = snap(4, 2, MS / 10, 0.05, 10 * MS, 0.01, 0.0);
  assert_int_equal(stoke_advise(&busy, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  assert_true(n >= 1);
  assert_int_equal(a[0].kind, STOKE_ADVICE_MODEL);
  assert_non_null(strstr(a[0].text, "the model is the cost"));

  /* CPU-bound, oversubscribed (16 workers, 2 cores) and still slower than
  ** a tiny step: fewer workers do as well, cheaper reads, then echoing. */
  stoke_stats cpu = snap(16, 2, 8 * MS, 0.125, MS / 10, 0.95, 1.0);
  cpu.wait.total_ns = 800 * 8 * MS / 16 - cpu.compute.total_ns;
  assert_int_equal(stoke_advise(&cpu, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  const stoke_advice *fewer = find(a, n, STOKE_ADVICE_FEWER);
  assert_non_null(fewer);
  assert_true(fewer->n_workers <= 2);
  assert_non_null(strstr(fewer->text, "oversubscribed"));
  const stoke_advice *cheaper = find(a, n, STOKE_ADVICE_CHEAPER);
  assert_non_null(cheaper);
  assert_int_equal(cheaper->stage, STOKE_STAGE_READ);
  const stoke_advice *echo = find(a, n, STOKE_ADVICE_ECHO);
  assert_non_null(echo);
  assert_true(echo->echo >= 2);
  assert_ptr_equal(echo, &a[n - 1]); /* the last resort comes last */
  char flag[32]; /* the advice gives the flag that does it */
  snprintf(flag, sizeof flag, "--echo %u", echo->echo);
  assert_non_null(strstr(echo->text, flag));
  /* A run that echoes already: its producer's cost per step's sample is
  ** over echo, and the advice asks for echo times as much. */
  unsigned fresh_e = echo->echo;
  stoke_stats ech = cpu;
  ech.echo = 2;
  stoke_model m;
  assert_int_equal(stoke_model_init(&m, &ech, NULL, 2), 0);
  assert_int_equal(m.echo, 2);
  assert_int_equal(m.t_d_ns, 4 * MS);
  assert_int_equal(stoke_advise(&ech, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  echo = find(a, n, STOKE_ADVICE_ECHO);
  assert_non_null(echo);
  /* echo times as much as the fresh run was asked (echo % 2 == 0, the
  ** assertion before, held by construction). */
  assert_int_equal(echo->echo, 2 * fresh_e);

  /* A measured copy on the critical path. */
  stoke_stats cp = snap(8, 2, MS / 10, 0.05, 1 * MS, 0.6, 0.2);
  stoke_dist *c = &cp.stage[STOKE_STAGE_COPY];
  c->count = 100;
  c->total_ns = 100 * 3 * MS;
  c->mean_ns = c->p50_ns = 3 * MS;
  assert_int_equal(stoke_advise(&cp, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  const stoke_advice *pin = find(a, n, STOKE_ADVICE_PIN_COPY);
  assert_non_null(pin);
  assert_true(pin->speedup > 2);

  /* Capacity and bad arguments. */
  assert_int_equal(stoke_advise(&st, NULL, 2, a, 0, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(stoke_advise(&st, NULL, 2, NULL, 1, &n), STOKE_EINVAL);
  assert_int_equal(stoke_advise(&st, NULL, 2, a, 1, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(stoke_advise(NULL, NULL, 2, a, 1, &n), STOKE_EINVAL);
}

/* Decoding dominates and the stored images are 12 MP photos for a
** 224-pixel crop: pre-resize them, priced from the pixels saved. */
static void test_advice_presize(void **state) {
  (void)state;
  stoke_advice a[STOKE_MAX_ADVICE];
  size_t n;
  stoke_stats st = snap(2, 2, MS / 2, 1.0, 2 * MS, 0.9, 1.0);
  stoke_dist *d = &st.stage[STOKE_STAGE_DECODE];
  d->count = 800;
  d->mean_ns = d->p50_ns = d->p95_ns = d->p99_ns = d->max_ns = 20 * MS;
  d->total_ns = 800 * 20 * MS;
  st.worker_busy_ns = 800 * (MS / 2 + 20 * MS);
  st.worker_cpu_ns = st.worker_busy_ns;
  st.wait.total_ns = 800 * (MS / 2 + 20 * MS) / 2 - st.compute.total_ns;
  st.images = 800;
  st.image_pixels_mean = 4000.0 * 3000;
  st.image_side_mean = 4000;
  st.image_keep_side = 512;
  assert_int_equal(stoke_advise(&st, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  const stoke_advice *p = find(a, n, STOKE_ADVICE_PRESIZE);
  assert_non_null(p);
  assert_int_equal(p->max_side, 512);
  assert_int_equal(p->stage, STOKE_STAGE_DECODE);
  assert_true(p->speedup > 5);
  assert_non_null(strstr(p->text, "--max-side 512"));
  assert_non_null(strstr(p->text, "12.0 MP"));
  assert_ptr_equal(find(a, n, STOKE_ADVICE_ECHO), &a[n - 1]);
  /* Images already about the size the transform keeps: no. */
  stoke_stats small = st;
  small.image_side_mean = 700;
  small.image_pixels_mean = 700.0 * 500;
  assert_int_equal(stoke_advise(&small, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  assert_null(find(a, n, STOKE_ADVICE_PRESIZE));
  /* Reading dominates, not decoding: no. */
  stoke_stats rd = st;
  rd.stage[STOKE_STAGE_READ].total_ns = 800 * 40 * MS;
  assert_int_equal(stoke_advise(&rd, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  assert_null(find(a, n, STOKE_ADVICE_PRESIZE));
  /* No image sizes known (not an image source): no. */
  stoke_stats none = st;
  none.images = 0;
  assert_int_equal(stoke_advise(&none, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  assert_null(find(a, n, STOKE_ADVICE_PRESIZE));
}

static void test_diagnose_ex_fields(void **state) {
  (void)state;
  stoke_stats st = snap(2, 2, 1 * MS, 0.05, 2 * MS, 0.5, 1.0);
  stoke_diagnosis d;
  assert_int_equal(stoke_diagnose_ex(&st, NULL, 2, &d), 0);
  assert_int_equal(d.verdict, STOKE_VERDICT_STARVING);
  assert_int_equal(d.t_d_ns, 1 * MS);
  assert_int_equal(d.t_c_ns, 2 * MS);
  assert_int_equal(d.batch_size, 8);
  assert_true(fabs(d.cpu_frac - 0.05) < 1e-6);
  assert_int_equal(d.producer_batch_ns, 4 * MS);
  assert_int_equal(d.measured_step_ns, 4 * MS);
  assert_int_equal(d.bound, STOKE_BOUND_WORKERS);
  assert_true(fabs(d.model_error) < 0.03);
  assert_string_equal(stoke_bound_name(d.bound), "workers");
  /* The old entry point still works and fills the same. */
  stoke_diagnosis d0;
  assert_int_equal(stoke_diagnose(&st, &d0), 0);
  assert_int_equal(d0.verdict, d.verdict);
  assert_int_equal(d0.t_d_ns, d.t_d_ns);
}

/* CPU-bound workers on few cores finish batches in bursts: the queue is
** non-empty at most next() calls although the producer is far slower than
** the step.  The producer floor (>= 5x past the 1.2 threshold either way)
** decides, not the queue. */
static void test_producer_floor_rule(void **state) {
  (void)state;
  stoke_diagnosis d;
  /* 8 spin workers, 1 ms of CPU per sample stretched to 4 ms of wall on
  ** 2 cores: >= 4 ms per batch of 8 against a 0.5 ms step (8x). */
  stoke_stats st = snap(8, 2, 4 * MS, 0.25, MS / 2, 0.85, 0.30);
  assert_int_equal(stoke_diagnose_ex(&st, NULL, 2, &d), 0);
  assert_int_equal(d.verdict, STOKE_VERDICT_STARVING);
  assert_non_null(strstr(d.reason, "producer"));
  /* Without the cores: the measured t_d alone gives B * t_d / W = 4 ms. */
  assert_int_equal(stoke_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_VERDICT_STARVING);
  /* The same producer against a 40 ms step: 10x under, a real tail. */
  stoke_stats tail = snap(8, 2, 4 * MS, 0.25, 40 * MS, 0.30, 0.10);
  assert_int_equal(stoke_diagnose_ex(&tail, NULL, 2, &d), 0);
  assert_int_equal(d.verdict, STOKE_VERDICT_VARIANCE);
  /* From an edited model: a spinning step leaves 1 of 2 cores, so 1 ms of
  ** CPU per sample is >= 8 ms per batch against a 1.5 ms step (5.3x). */
  stoke_stats cpu = snap(8, 2, MS, 1.0, 3 * MS / 2, 0.5, 0.2);
  stoke_model m;
  assert_int_equal(stoke_model_init(&m, &cpu, NULL, 2), 0);
  m.consumer_cpu = 1.0;
  assert_int_equal(stoke_diagnose_model(&cpu, &m, &d), 0);
  assert_int_equal(d.verdict, STOKE_VERDICT_STARVING);
  assert_int_equal(stoke_diagnose_model(&cpu, NULL, &d), STOKE_EINVAL);

  /* The consumer's clock says computing 98% of the time, but its thread
  ** was waiting for a core the workers held: with the step it asked for
  ** (0.5 ms, taken from the model) the >= 4 ms producer starves it (6.7x);
  ** with the step as measured (25 ms) it is busy (7.5x under). */
  stoke_stats hog = snap(8, 2, MS, 1.0, 25 * MS, 0.02, 0.0);
  assert_int_equal(stoke_model_init(&m, &hog, NULL, 2), 0);
  assert_int_equal(stoke_diagnose_model(&hog, &m, &d), 0);
  assert_int_equal(d.verdict, STOKE_VERDICT_BUSY);
  m.t_c_ns = MS / 2;
  assert_int_equal(stoke_diagnose_model(&hog, &m, &d), 0);
  assert_int_equal(d.verdict, STOKE_VERDICT_STARVING);
  assert_non_null(strstr(d.reason, "producer"));
}

/* ---- real runs --------------------------------------------------------- */

static void sleep_ns(int64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

typedef struct real {
  stoke_diagnosis d;
  stoke_advice a[STOKE_MAX_ADVICE];
  size_t n_advice;
} real;

static void run_real(int kind, int64_t cost, unsigned w, int64_t step,
                     real *out) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = kind;
  sc.cost_ns = cost;
  sc.n_samples = 32;
  sc.ndim = 1;
  sc.shape[0] = 16;
  stoke_source *src = NULL;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 4;
  cfg.n_workers = w;
  cfg.warmup_epochs = 1;
  stoke_loader *l = NULL;
  assert_int_equal(stoke_loader_create(&cfg, &l), 0);
  stoke_source_destroy(src);
  for (int e = 0; e < 2; e++) {
    stoke_batch *b;
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
      sleep_ns(step);
      stoke_batch_release(b);
    }
    assert_int_equal(rc, STOKE_END);
  }
  stoke_stats st;
  st.struct_size = sizeof st;
  assert_int_equal(stoke_loader_stats(l, &st), 0);
  stoke_config eff;
  stoke_loader_config(l, &eff);
  assert_int_equal(stoke_diagnose_ex(&st, &eff, 0, &out->d), 0);
  assert_int_equal(stoke_advise(&st, &eff, 0, out->a, STOKE_MAX_ADVICE,
                                &out->n_advice),
                   0);
  stoke_loader_destroy(l);
}

static void test_real_runs(void **state) {
  (void)state;
  real r;
  /* 1 worker, 2 ms per sample (8 ms per batch) against a 0.2 ms step: 40x
  ** starving, bound by the workers; the first advice adds workers. */
  run_real(STOKE_SYNTH_SLEEP, 2 * MS, 1, MS / 5, &r);
  assert_int_equal(r.d.verdict, STOKE_VERDICT_STARVING);
  assert_int_equal(r.d.bound, STOKE_BOUND_WORKERS);
  assert_true(r.n_advice >= 1);
  assert_int_equal(r.a[0].kind, STOKE_ADVICE_WORKERS);
  assert_true(r.a[0].n_workers > 1);

  /* In-memory tensors against a 20 ms step: busy, bound by the consumer.
  ** The step is long next to a scheduling delay: with a 3 ms step, a
  ** worker kept off the cores for a few ms (ctest -j2 beside three other
  ** test processes on 2 cores) made a wait that read as "variance" about
  ** once in 25 runs. */
  run_real(STOKE_SYNTH_TENSOR, 0, 2, 20 * MS, &r);
  assert_int_equal(r.d.verdict, STOKE_VERDICT_BUSY);
  assert_int_equal(r.d.bound, STOKE_BOUND_CONSUMER);
  assert_true(r.n_advice >= 1);
  assert_int_equal(r.a[0].kind, STOKE_ADVICE_MODEL);

  /* No workers, 1 ms per sample, a 0.1 ms step: 40x starving, inline. */
  run_real(STOKE_SYNTH_SLEEP, 1 * MS, 0, MS / 10, &r);
  assert_int_equal(r.d.verdict, STOKE_VERDICT_STARVING);
  assert_int_equal(r.d.bound, STOKE_BOUND_INLINE);
  assert_int_equal(r.a[0].kind, STOKE_ADVICE_WORKERS);
}

static void say_dummy(void *user, int setting, unsigned v, unsigned workers,
                      char *buf, size_t n) {
  snprintf(buf, n, "%s %d=%u/%u", (const char *)user, setting, v, workers);
}

/* stoke_advice_name: no words are stoke_advice.text's (the tool's flags),
** given words are used as they are, and a short or absent buffer is safe. */
static void test_advice_name(void **state) {
  (void)state;
  char buf[64];
  stoke_advice_name(NULL, STOKE_SETTING_WORKERS, 4, 4, buf, sizeof buf);
  assert_string_equal(buf, "-j 4");
  stoke_advice_name(NULL, STOKE_SETTING_PREFETCH, 3, 4, buf, sizeof buf);
  assert_string_equal(buf, "--prefetch 3");
  stoke_advice_name(NULL, STOKE_SETTING_ECHO, 2, 0, buf, sizeof buf);
  assert_string_equal(buf, "--echo 2 (Loader(echo=2))");
  stoke_advice_words none = {NULL, NULL};
  stoke_advice_name(&none, STOKE_SETTING_SAME_WORKERS, 0, 0, buf, sizeof buf);
  assert_string_equal(buf, "with that -j");
  stoke_advice_words mine = {say_dummy, "w"};
  stoke_advice_name(&mine, STOKE_SETTING_PREFETCH, 3, 8, buf, sizeof buf);
  assert_string_equal(buf, "w 2=3/8");
  char small[4];
  stoke_advice_name(NULL, STOKE_SETTING_DEVICE_PREFETCH, 2, 0, small,
                    sizeof small);
  assert_string_equal(small, "--d");
  stoke_advice_name(NULL, STOKE_SETTING_WORKERS, 4, 4, NULL, 8);
  buf[0] = 'x';
  stoke_advice_name(NULL, STOKE_SETTING_WORKERS, 4, 4, buf, 0);
  assert_int_equal(buf[0], 'x');
  stoke_advice_name(NULL, 999, 1, 1, buf, sizeof buf);
  assert_string_equal(buf, "?");
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_model_init_arithmetic),
      cmocka_unit_test(test_predict_closed_form),
      cmocka_unit_test(test_predict_processor_sharing),
      cmocka_unit_test(test_advice_ladder),
      cmocka_unit_test(test_advice_presize),
      cmocka_unit_test(test_diagnose_ex_fields),
      cmocka_unit_test(test_producer_floor_rule),
      cmocka_unit_test(test_real_runs),
      cmocka_unit_test(test_advice_name),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
