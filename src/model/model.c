/* model.c — the queue model: from measured clocks to a predicted step.
**
** DESIGN
** A loader is a producer (W workers, each spending t_d of wall time per
** sample, of which t_cpu on a core and t_io off it) feeding a consumer that
** spends t_c per batch of B samples through K + 1 batch slots.  In steady
** state one batch costs the producer
**
**   T_p(W) = B * max( (t_cpu + t_io) / W_eff ,  t_cpu / P )
**
** where W_eff = min(W, samples in flight the slots allow) and P the cores
** left to the workers (cores - consumer_cpu, at least 1): the first term is
** the workers' own latency bound, the second the CPU bound that no number
** of workers can beat.  The step is max(T_p, t_c) + copy; with W = 0 the
** consumer's thread fills each batch itself, so step = B * (t_cpu + t_io) +
** t_c.  docs/diagnosis.md derives it.
**
** The closed form gives the mean.  Waits also come from the spread of the
** per-sample cost (a slow sample holds its whole batch back) and from slots
** (K + 1 buffers cap how far ahead the producer runs), which the closed form
** cannot see; stoke_predict_step therefore also replays the loader's rules
** in a small deterministic simulation: samples claimed in order in chunks by
** the first free worker, a batch taking a slot when its first chunk starts
** and freeing it when the consumer releases it, batches handed out in
** order.  Per-sample costs are drawn from the measured shape of the cost
** (its p50, p95, p99 and max over its mean, stoke_model.cost_q; a
** lognormal of sigma from the mean/median ratio where no shape was
** measured) around the measured mean, each split into t_cpu work done
** first and t_io of sleeping after it; the cores are shared as the OS
** shares them (processor sharing): the n samples in their CPU phase at a
** given moment progress at min(1, P / n) each, so a long sample speeds up
** as the others finish.  The simulation is event-driven, uses no
** allocation and a fixed seed: the same model always predicts the same.
**
** Measuring t_io: on a saturated machine a worker's wall time also contains
** time spent runnable but waiting for a core.  Where the OS says (Linux
** schedstat, while the workers live) that wait is measured: r = run delay
** per ns on a core, t_io = max(0, t_d - t_cpu * (1 + r)), whoever took the
** cores.  Else, with A workers producing at once on P cores each CPU-bound
** sample stretches by max(1, A / P), so t_io = max(0, t_d - t_cpu *
** max(1, A / P)), A being busy time over wall time of the measured steps;
** CPU taken by other processes then reads as t_io.
**
** Other work on the cores: the measured run delay also says how much else
** was runnable next to the workers (external_cpu, from the loader's
** window).  A prediction shares the cores with it at every W: the CPU part
** of a sample stretches by (busy workers + others) / P, so a what-if for 4
** workers made from a 2-worker run on a loaded machine is not predicted as
** if the 2 cores were theirs alone (spin samples at W >= 4 ran ~20% slower
** than predicted that way on a shared 2-core VM). */
#include "model/model.h"

#include <math.h>
#include <string.h>

const char *stoke_bound_name(int bound) {
  switch (bound) {
  case STOKE_BOUND_CONSUMER: return "consumer";
  case STOKE_BOUND_WORKERS: return "workers";
  case STOKE_BOUND_CORES: return "cores";
  case STOKE_BOUND_SLOTS: return "slots";
  case STOKE_BOUND_INLINE: return "inline";
  case STOKE_BOUND_GIL: return "gil";
  default: return "none";
  }
}

/* Samples made by Python code: how much of a sample waits for the GIL, how
** busy the workers keep it, and whether it is what limits them.
**
** The GIL is one lock for every thread that runs Python: at most one core's
** worth of Python runs at a time.  Two measurements say when it is the
** limit.  (1) The wait to take it before each call (GIL_WAIT) is a large
** share of a Python sample: the threads queue for it.  That is exact for
** samples shorter than the interpreter's switch interval (5 ms), which run
** to the end once they hold it; longer ones are also preempted inside the
** call, where the wait cannot be told from sleeping.  (2) So also: with 2
** or more workers and a core to spare, the workers' CPU time per step (B x
** t_cpu, all of it while holding the GIL for pure Python) is about one
** core, and they either spend a good share of their time blocked — neither
** on a core nor queueing for one (schedstat's run delay) — or still wait a
** real share at the GIL's entry: the GIL is saturated.  That tells the GIL
** from the cores: workers competing for too few cores (PIL's decode on a
** loaded machine, which also adds up to about one core) are runnable, not
** blocked, and release the GIL for most of a sample, so they barely wait
** to take it.  (On a loaded machine a woken GIL waiter also queues for a
** core, so blocked time alone would miss it.)  A dataset that sleeps or
** waits on I/O releases the GIL, uses little CPU and fits neither; one
** whose C calls release the GIL (PIL, torch's ops) uses more than one core
** when it has them.  When either holds, t_gil = t_cpu: the producer needs
** at least B x t_gil per batch whatever W is. */
static void python_model(stoke_model *m, const stoke_stats *st) {
  int64_t py = m->stage_ns[STOKE_STAGE_PYTHON] +
               m->stage_ns[STOKE_STAGE_GIL_WAIT] +
               m->stage_ns[STOKE_STAGE_COLLATE];
  if (py <= 0 || m->t_d_ns <= 0) return;
  m->gil_wait_frac =
      (double)m->stage_ns[STOKE_STAGE_GIL_WAIT] / (double)py;
  /* Worker processes have a GIL each: none is shared, none can cap them
  ** (their CPU per step says nothing about a lock). */
  if (st->struct_size >= offsetof(stoke_stats, worker_processes) +
                             sizeof st->worker_processes &&
      st->worker_processes)
    return;
  double step = st->steps ? (double)(st->wait.total_ns + st->compute.total_ns) /
                                (double)st->steps
                          : 0.0;
  if (step > 0)
    m->gil_busy = (double)m->batch_size * (double)m->t_cpu_ns / step;
  bool python = 2 * py >= m->t_d_ns; /* the sample is mostly Python */
  bool waits = m->gil_wait_frac >= STOKE_PYTHON_GIL_WAIT_FRAC;
  double cpu = (double)m->t_cpu_ns / (double)m->t_d_ns;
  double delay = m->run_delay_frac > 0 ? m->run_delay_frac : 0.0;
  double blocked = 1.0 - cpu * (1.0 + delay);
  bool saturated = m->n_workers >= 2 &&
                   m->gil_busy >= STOKE_PYTHON_GIL_BUSY &&
                   m->gil_busy <= 1.0 / STOKE_PYTHON_GIL_BUSY &&
                   stoke__model_cores_avail(m) >= 1.5 &&
                   (blocked >= STOKE_PYTHON_BLOCKED_FRAC ||
                    m->gil_wait_frac >= STOKE_PYTHON_GIL_WAIT_SOME);
  if (python && m->n_workers >= 1 && (waits || saturated))
    m->t_gil_ns = m->t_cpu_ns > 0 ? m->t_cpu_ns : m->t_d_ns;
}

static double slot_workers(const stoke_model *m, unsigned prefetch);

/* What else was runnable on the cores while the workers produced, in
** cores (stoke_model.external_cpu): n workers runnable at once while
** producing (those the slots let in, each for its share on or queueing
** for a core, t_cpu (1 + r) / t_d), on P cores shared fairly, wait
** r = (n + E) / P - 1 per ns on a core, so E = r P + P - n.  When n < P
** the P - n spare cores are only known to be taken if the wait is real
** (a wake-up costs a little wait on an idle machine): that term is scaled
** in up to r = STOKE_MODEL_CONTENDED. */
#define STOKE_MODEL_CONTENDED 0.1
static double external_demand(const stoke_model *m) {
  double r = m->run_delay_frac, p = m->cores;
  if (!(r > 0) || m->t_d_ns <= 0 || m->n_workers == 0) return 0;
  double slots = slot_workers(m, m->prefetch ? m->prefetch : 1);
  double w = (double)m->n_workers < slots ? (double)m->n_workers : slots;
  double share = (double)m->t_cpu_ns * (1 + r) / (double)m->t_d_ns;
  double n = w * (share < 1 ? share : 1);
  double spare = p - n;
  double e = r * p + (spare > 0 ? spare * (r < STOKE_MODEL_CONTENDED
                                               ? r / STOKE_MODEL_CONTENDED
                                               : 1.0)
                                : spare);
  if (e < 0) e = 0;
  return e < 4 * p ? e : 4 * p;
}

/* The cost's quantiles over its mean (stoke_model.cost_q) from the
** dominant stage's distribution d, whose mean/median, deflated for
** queueing for a core, is r: the deviations from the median in log space
** shrink by log(r) / log(measured mean/median), so that at s = 1 the
** quantiles are the measured ones and a fixed cost stays fixed. */
static void cost_shape(stoke_model *m, const stoke_dist *d, double r) {
  memset(m->cost_q, 0, sizeof m->cost_q);
  double mean = (double)d->mean_ns, p50 = (double)d->p50_ns;
  if (!(r > 1.03) || mean <= 0 || p50 <= 0 || d->count < 20) return;
  double raw = mean / p50;
  double a = raw > 1.0 ? log(r) / log(raw) : 0.0;
  if (a > 1) a = 1;
  const int64_t q[4] = {d->p50_ns, d->p95_ns, d->p99_ns, d->max_ns};
  double prev = 0;
  for (int i = 0; i < 4; i++) {
    double v = (double)q[i] > p50 ? (double)q[i] : p50;
    v = p50 * pow(v / p50, a) / mean;
    if (v < prev) v = prev; /* quantiles never fall */
    m->cost_q[i] = prev = v;
  }
}

int stoke_model_init(stoke_model *m, const stoke_stats *st,
                     const stoke_config *cfg, unsigned cores) {
  if (!m || !st) return STOKE_EINVAL;
  memset(m, 0, sizeof *m);
  m->struct_size = sizeof *m;
  m->run_delay_frac = -1;
  if (st->steps == 0) return STOKE_EINVAL;
  m->n_workers = st->n_workers;
  m->prefetch = st->prefetch ? st->prefetch : 1;
  m->cores = cores ? cores : stoke__online_cpus();
  if (m->cores < 1) m->cores = 1;
  m->prefetch_next_epoch = cfg ? cfg->prefetch_next_epoch : 1;
  if (cfg && cfg->batch_size)
    m->batch_size = cfg->batch_size;
  else
    m->batch_size = (size_t)((double)st->samples / (double)st->steps + 0.5);
  if (m->batch_size < 1) m->batch_size = 1;

  /* Every produced sample passes READ: its count is the number produced
  ** (the consumer's count when the stages were not timed). */
  uint64_t produced = st->stage[STOKE_STAGE_READ].count;
  if (!produced) produced = st->samples;
  int64_t work = 0, top = 0;
  int top_stage = STOKE_STAGE_READ;
  for (int s = 0; s < STOKE_STAGE_COUNT; s++) {
    const stoke_dist *d = &st->stage[s];
    if (!produced) break;
    if (!stoke__stage_is_work(s)) continue;
    m->stage_ns[s] = d->total_ns / (int64_t)produced;
    work += d->total_ns;
    if (d->total_ns > top) {
      top = d->total_ns;
      top_stage = s;
    }
  }
  if (work == 0) work = st->worker_busy_ns;
  if (produced) m->t_d_ns = work / (int64_t)produced;
  double cpu_frac = st->worker_busy_ns > 0 ? (double)st->worker_cpu_ns /
                                                 (double)st->worker_busy_ns
                                           : 0.0;
  if (cpu_frac > 1) cpu_frac = 1;
  if (cpu_frac < 0) cpu_frac = 0;
  m->t_cpu_ns = (int64_t)((double)m->t_d_ns * cpu_frac);

  /* Queueing for a core, measured: the live workers' run delay per ns of
  ** CPU (schedstat), whoever held the cores, our workers or another
  ** process.  Else estimated: A workers producing at once, averaged over
  ** the measured steps, share P cores. */
  double stretch = 1.0;
  int64_t run_ns = 0, delay_ns = 0;
  m->run_delay_frac = -1;
  /* The loader's own window when the snapshot has it (threads that ran
  ** while it measured), else the live threads' totals. */
  bool window = st->struct_size >= offsetof(stoke_stats, threads_delay_ns) +
                                       sizeof st->threads_delay_ns &&
                st->threads_active > 0;
  int seen;
  if (window) {
    seen = st->threads_active;
    run_ns = st->threads_run_ns;
    delay_ns = st->threads_delay_ns;
  } else {
    seen = st->n_workers
               ? stoke__schedstat_threads("stoke-w", &run_ns, &delay_ns)
               : -1;
  }
  if (seen > 0) m->threads_seen = (unsigned)seen;
  if (seen > 0 && run_ns > 0) {
    m->run_delay_frac = (double)delay_ns / (double)run_ns;
    stretch = 1.0 + m->run_delay_frac;
  } else {
    double wall = (double)(st->wait.total_ns + st->compute.total_ns);
    double active = wall > 0 ? (double)st->worker_busy_ns / wall : 0.0;
    double p = m->cores - m->consumer_cpu;
    if (p < 1) p = 1;
    stretch = st->n_workers && active > p ? active / p : 1.0;
  }
  double io = (double)m->t_d_ns - (double)m->t_cpu_ns * stretch;
  m->t_io_ns = io > 0 ? (int64_t)io : 0;

  /* Spread: lognormal sigma from mean/median of the dominant stage, which
  ** is timed per sample when samples are not cheap.  The log buckets are
  ** within 1.6%, so a ratio under 1.03 reads as a fixed cost.  Queueing
  ** for a core is not spread of the work: on a saturated machine most
  ** CPU-bound samples finish inside one time slice (the median barely
  ** moves) while preempted ones wait a whole round (the mean stretches by
  ** s = t_d / (t_cpu + t_io)), so the ratio is divided by s; the
  ** simulation's processor sharing reproduces the queueing itself. */
  const stoke_dist *d = &st->stage[top_stage];
  if (d->p50_ns > 0 && d->mean_ns > 0) {
    double r = (double)d->mean_ns / (double)d->p50_ns;
    double own = (double)(m->t_cpu_ns + m->t_io_ns);
    if (own > 0 && (double)m->t_d_ns > own) r /= (double)m->t_d_ns / own;
    m->sigma = r > 1.03 ? sqrt(2.0 * log(r)) : 0.0;
    if (m->sigma > 3.0) m->sigma = 3.0;
    cost_shape(m, d, r);
  }

  /* Data echoing: every produced sample feeds `echo` delivered ones (the
  ** copies of example echoing share its read and decode), so the
  ** producer's cost per sample of a step is its cost over echo. */
  m->echo = st->echo > 1 ? st->echo : 1;
  if (m->echo > 1) {
    m->t_d_ns /= m->echo;
    m->t_cpu_ns /= m->echo;
    m->t_io_ns /= m->echo;
    for (int s = 0; s < STOKE_STAGE_COUNT; s++) m->stage_ns[s] /= m->echo;
  }

  m->t_c_ns = st->compute.mean_ns;
  /* On the critical path: with the device stage only the part of the copy
  ** the consumer's stream waited for (the rest ran under the steps);
  ** otherwise a measured copy, all of it. */
  if (st->copy_wait.count)
    m->copy_ns = st->copy_wait.total_ns / (int64_t)st->steps;
  else if (st->stage[STOKE_STAGE_COPY].count)
    m->copy_ns = st->stage[STOKE_STAGE_COPY].total_ns / (int64_t)st->steps;
  python_model(m, st);
  m->chunk = st->chunks ? (size_t)((double)produced / (double)st->chunks + 0.5)
                        : 1;
  if (m->chunk < 1) m->chunk = 1;
  if (m->chunk > m->batch_size) m->chunk = m->batch_size;
  /* Only the loader's own window says what competed while it measured
  ** (the live threads' totals span their whole life). */
  if (window) m->external_cpu = external_demand(m);
  return 0;
}

/* ---- the closed form ------------------------------------------------------ */

double stoke__model_cores_avail(const stoke_model *m) {
  double p = m->cores - m->consumer_cpu;
  return p < 1 ? 1 : p;
}

/* Workers that can be producing at once: samples in flight are capped by
** the K + 1 slots (the consumer holds one while it computes), one chunk
** per worker. */
static double slot_workers(const stoke_model *m, unsigned prefetch) {
  double per_batch = ceil((double)m->batch_size / (double)m->chunk);
  return ((double)prefetch + 1.0) * per_batch;
}

/* Other work on the cores (external_cpu, less the consumer's CPU, which
** is already left out of the workers' cores); 0 on a machine of our own. */
static double others_cpu(const stoke_model *m) {
  double e = m->external_cpu - m->consumer_cpu;
  return e > 0 ? e : 0;
}

/* How much slower the workers' CPU work runs with `busy` cores' worth of
** them runnable next to the others: (busy + others) / cores available, at
** least 1; 1 with no others (the workers' own sharing is the CPU bound's
** and the simulation's). */
static double cpu_stretch(const stoke_model *m, double busy) {
  double e = others_cpu(m);
  if (e <= 0) return 1;
  double s = (busy + e) / stoke__model_cores_avail(m);
  return s > 1 ? s : 1;
}

int64_t stoke__model_producer_batch(const stoke_model *m, unsigned workers,
                                    unsigned prefetch, int *bound) {
  double b = (double)m->batch_size;
  double d = (double)(m->t_cpu_ns + m->t_io_ns);
  if (workers == 0) {
    if (bound) *bound = STOKE_BOUND_INLINE;
    return (int64_t)(b * d);
  }
  double slots = slot_workers(m, prefetch);
  double w_eff = (double)workers < slots ? (double)workers : slots;
  double lat = b * d / w_eff;
  double cpu = b * (double)m->t_cpu_ns / stoke__model_cores_avail(m);
  /* Other threads on the cores: each worker's CPU work stretches by their
  ** share as well (as in the simulation); the bound is still the cores'
  ** when that at least doubles the workers' latency. */
  double s = cpu_stretch(m, d > 0 ? w_eff * (double)m->t_cpu_ns / d : 0);
  double lat_s = b * ((double)m->t_cpu_ns * s + (double)m->t_io_ns) / w_eff;
  double gil = b * (double)m->t_gil_ns; /* one GIL for every worker */
  if (bound) {
    if (gil > lat_s && gil > cpu)
      *bound = STOKE_BOUND_GIL;
    else if (cpu >= lat || lat_s >= 2 * lat)
      *bound = STOKE_BOUND_CORES;
    else
      *bound = (double)workers > slots ? STOKE_BOUND_SLOTS
                                        : STOKE_BOUND_WORKERS;
  }
  if (lat_s > lat) lat = lat_s;
  double worst = lat > cpu ? lat : cpu;
  return (int64_t)(gil > worst ? gil : worst);
}

/* A lower bound of the producer's time per batch at the run's own W and K,
** for the verdict: the closed form, and B * t_d / W_eff with t_d the wall
** time per sample as measured, which already contains whatever queueing
** for a core the run met (other processes included) at a concurrency no
** higher than W_eff. */
int64_t stoke__model_producer_floor(const stoke_model *m) {
  if (m->n_workers == 0 || m->t_d_ns <= 0) return 0;
  unsigned k = m->prefetch ? m->prefetch : 1;
  int64_t tp = stoke__model_producer_batch(m, m->n_workers, k, NULL);
  double slots = slot_workers(m, k);
  double w_eff = (double)m->n_workers < slots ? (double)m->n_workers : slots;
  double meas = (double)m->batch_size * (double)m->t_d_ns / w_eff;
  return (double)tp > meas ? tp : (int64_t)meas;
}

/* ---- the simulation ------------------------------------------------------- */

#define SIM_MAX_WORKERS 256
#define SIM_MAX_SLOTS 64
#define SIM_MAX_SAMPLES 16384

typedef struct sim_out {
  double epoch_ns; /* mean wall of the epochs after the first */
  double step_ns;
  double wait_ratio;
} sim_out;

/* One worker's chunk in progress: its current sample ends when the work
** clock reaches v_end. */
typedef struct sim_job {
  double v_end;
  uint64_t sample; /* the current sample's index in the simulated run */
  size_t left;     /* samples of the chunk after the current one */
  size_t batch;
} sim_job;

/* The measured shape of the cost (stoke_model.cost_q) as an inverse CDF
** over the mean: knots at u = 0, 0.5, 0.95, 0.99 and 1, log-linear between
** them, the u = 0 value the p95 mirrored about the median in log space,
** divided by its own mean so that the mean is the model's. */
#define SIM_KNOTS 5
typedef struct sim_shape {
  int on;
  double v[SIM_KNOTS];
  double scale;
} sim_shape;

static const double sim_knot_u[SIM_KNOTS] = {0.0, 0.5, 0.95, 0.99, 1.0};

static double segment_mean(double a, double b) {
  return b > a * 1.000001 ? (b - a) / log(b / a) : a;
}

static void shape_init(sim_shape *sh, const stoke_model *m) {
  memset(sh, 0, sizeof *sh);
  const double *q = m->cost_q;
  if (!(q[0] > 0) || !(q[3] > q[0] * 1.000001)) return;
  sh->v[0] = q[1] > q[0] ? q[0] * q[0] / q[1] : q[0];
  for (int i = 0; i < 4; i++) sh->v[i + 1] = q[i];
  double mean = 0;
  for (int i = 0; i + 1 < SIM_KNOTS; i++)
    mean += (sim_knot_u[i + 1] - sim_knot_u[i]) *
            segment_mean(sh->v[i], sh->v[i + 1]);
  if (!(mean > 0)) return;
  sh->scale = 1.0 / mean;
  sh->on = 1;
}

static double shape_draw(const sim_shape *sh, double u) {
  int i = 0;
  while (i + 2 < SIM_KNOTS && u >= sim_knot_u[i + 1]) i++;
  double t = (u - sim_knot_u[i]) / (sim_knot_u[i + 1] - sim_knot_u[i]);
  double a = sh->v[i], b = sh->v[i + 1];
  return a * pow(b / a, t) * sh->scale;
}

typedef struct sim_state {
  double sigma, d; /* spread; mean cost per sample, t_cpu + t_io */
  double v; /* work clock: the work one in-flight sample has been given */
  stoke_rng rng;
  sim_shape shape; /* the measured shape, when on: instead of sigma */
} sim_state;

/* Starts sample j->sample: a lognormal cost around the mean d.  The draw
** depends on the sample's index only (a normal takes two counters of the
** stream, so sample i gets the i-th draw whatever order the samples start
** in): what-if rows differ by the setting, not by who claimed what when. */
static void sim_start(sim_state *s, sim_job *j) {
  double x = 1.0;
  if (s->shape.on) {
    s->rng.counter = 2 * j->sample;
    x = shape_draw(&s->shape, stoke_rng_uniform(&s->rng));
  } else if (s->sigma > 0) {
    s->rng.counter = 2 * j->sample;
    x = exp(s->sigma * stoke_rng_normal(&s->rng) - 0.5 * s->sigma * s->sigma);
  }
  j->v_end = s->v + s->d * x;
}

/* The loader's rules replayed under processor sharing.  Chunks are claimed
** in order by a free worker, the first chunk of a batch once the batch has
** a slot (batch j - S released; S = K + 1) and, without epoch prefetch,
** once the previous epoch is over.  A sample's CPU work and its waiting
** interleave finely (read a block, decode it, read the next), so while in
** flight it asks for f = t_cpu / (t_cpu + t_io) of a core; the OS shares
** the P cores among the n samples in flight, each progressing at
** min(1, P / (n f)) of its own speed: a long sample speeds up as the others
** finish.  Time jumps from event to event: a sample ending, a slot freeing
** (the consumer releasing a batch t_c + copy after it got it).  Fixed
** arrays only: at most SIM_MAX_WORKERS chunks in flight. */
static void simulate(const stoke_model *m, unsigned workers, unsigned prefetch,
                     size_t nb, unsigned epochs, sim_out *out) {
  sim_job job[SIM_MAX_WORKERS];
  double release[SIM_MAX_SLOTS]; /* ring: release time of batch j % S */
  double done_at[SIM_MAX_SLOTS]; /* ring: when batch j's last chunk ended */
  size_t chunks_left[SIM_MAX_SLOTS];
  unsigned w = workers < SIM_MAX_WORKERS ? workers : SIM_MAX_WORKERS;
  if (w < 1) w = 1;
  unsigned slots = prefetch + 1 < SIM_MAX_SLOTS ? prefetch + 1 : SIM_MAX_SLOTS;
  size_t b = m->batch_size, chunk = m->chunk;
  size_t per_batch = (b + chunk - 1) / chunk;
  double p = stoke__model_cores_avail(m);
  double tc = (double)(m->t_c_ns + m->copy_ns);
  size_t total = nb * (size_t)epochs;
  int gated = !m->prefetch_next_epoch;
  double d = (double)(m->t_cpu_ns + m->t_io_ns);
  double f = d > 0 ? (double)m->t_cpu_ns / d : 0.0; /* cores per sample */
  double g = d > 0 ? (double)m->t_gil_ns / d : 0.0;  /* GILs per sample */
  if (g > 1) g = 1;
  sim_state s = {m->sigma, d, 0, {0, 0}, {0}};
  shape_init(&s.shape, m);
  double t = 0; /* wall time */
  /* One seed for every (W, K): what-if rows differ by the setting only. */
  stoke_rng_init(&s.rng, 0x5707e, 0, 0);

  unsigned nact = 0;
  size_t jc = 0, off = 0; /* next chunk to claim: its batch, first sample */
  size_t jn = 0;          /* the next batch the consumer takes */
  double cons_free = 0, gate = 0, epoch_start = 0;
  double sum_epoch = 0, sum_wait = 0, sum_step = 0;
  memset(chunks_left, 0, sizeof chunks_left);
  memset(release, 0, sizeof release);
  memset(done_at, 0, sizeof done_at);
  while (jn < total) {
    /* Claims: free workers take the next chunks in order. */
    double claim_at = INFINITY;
    while (jc < total && nact < w) {
      if (off == 0) {
        double at = 0;
        if (jc >= slots) at = jn + slots > jc ? release[jc % slots] : INFINITY;
        if (gated && jc >= nb) {
          /* Nothing of an epoch starts before the consumer's first next()
          ** of it, right after the previous epoch's last release. */
          if (jn < jc / nb * nb)
            at = INFINITY;
          else if (gate > at)
            at = gate;
        }
        if (at > t) {
          claim_at = at;
          break;
        }
        chunks_left[jc % slots] = per_batch;
      }
      size_t n = b - off < chunk ? b - off : chunk;
      sim_job *j = &job[nact++];
      j->sample = (uint64_t)jc * b + off;
      j->left = n - 1;
      j->batch = jc;
      sim_start(&s, j);
      off += n;
      if (off >= b) {
        off = 0;
        jc++;
      }
    }
    /* The next event: the first in-flight sample to end, or a claim. */
    double v_min = INFINITY, t_next = claim_at;
    for (unsigned i = 0; i < nact; i++)
      if (job[i].v_end < v_min) v_min = job[i].v_end;
    double demand = (double)nact * f;
    double rate = demand > p ? p / demand : 1.0;
    /* Other threads on the cores stretch the CPU part of each sample, not
    ** its waiting; never faster than the workers' own sharing. */
    double se = cpu_stretch(m, demand);
    if (se > 1 && 1.0 / (f * se + 1.0 - f) < rate)
      rate = 1.0 / (f * se + 1.0 - f);
    /* The GIL is one more "core", for the share g of each sample that
    ** needs it. */
    double gdemand = (double)nact * g;
    if (gdemand > 1.0 && 1.0 / gdemand < rate) rate = 1.0 / gdemand;
    if (nact) {
      double t_end = t + (v_min - s.v) / rate;
      if (t_end < t_next) t_next = t_end;
    }
    if (!(t_next < INFINITY)) break; /* cannot happen: something is due */
    if (t_next > t) {
      s.v += (t_next - t) * rate;
      t = t_next;
    }
    /* Samples ending now (ties within rounding end together). */
    double eps = 1e-9 * (1.0 + s.v);
    for (unsigned i = 0; i < nact;) {
      sim_job *j = &job[i];
      if (j->v_end > s.v + eps) {
        i++;
        continue;
      }
      if (j->left) { /* the chunk's next sample, same worker */
        j->left--;
        j->sample++;
        sim_start(&s, j);
        continue; /* a zero-cost sample ends at once */
      }
      /* Chunk done: the worker is free; the batch may be complete. */
      size_t bj = j->batch;
      *j = job[--nact];
      if (--chunks_left[bj % slots]) continue;
      done_at[bj % slots] = t;
      /* The consumer takes the completed batches in order. */
      while (jn < jc && chunks_left[jn % slots] == 0) {
        double got = done_at[jn % slots] > cons_free ? done_at[jn % slots]
                                                     : cons_free;
        if (jn >= nb) {
          sum_wait += got - cons_free;
          sum_step += got - cons_free + tc;
        }
        cons_free = got + tc;
        release[jn % slots] = cons_free;
        chunks_left[jn % slots] = (size_t)-1; /* consumed, slot not reused */
        if ((jn + 1) % nb == 0) {
          if (jn >= nb) sum_epoch += cons_free - epoch_start;
          epoch_start = gate = cons_free;
        }
        jn++;
      }
    }
  }
  double n_ep = epochs > 1 ? (double)(epochs - 1) : 1.0;
  out->epoch_ns = sum_epoch / n_ep;
  out->step_ns = sum_epoch / (n_ep * (double)nb);
  out->wait_ratio = sum_step > 0 ? sum_wait / sum_step : 0.0;
}

/* The workers' CPU demand in cores at W and K: those producing at once
** times their share on a core, times the time they produce (a producer
** faster than the step waits for free slots). */
static double worker_cpu_demand(const stoke_model *m, unsigned workers,
                                unsigned prefetch, int64_t tc) {
  if (workers == 0 || m->t_d_ns <= 0) return 0;
  double own = (double)(m->t_cpu_ns + m->t_io_ns);
  double frac = own > 0 ? (double)m->t_cpu_ns / own : 0;
  double slots = slot_workers(m, prefetch);
  double w = (double)workers < slots ? (double)workers : slots;
  double pb = (double)stoke__model_producer_batch(m, workers, prefetch, NULL);
  double duty = pb > 0 && pb < (double)tc ? pb / (double)tc : 1.0;
  double demand = w * frac * duty, p = m->cores > 0 ? m->cores : 1;
  return demand < p ? demand : p;
}

/* The consumer's step at W and K: its own time, plus its wait for a core
** scaled from the run's (consumer_delay_ns at m's W and K) by the workers'
** CPU demand.  A step measured while W spinning workers held the cores
** is not predicted for 0 or 1 workers as it was measured. */
static int64_t consumer_step(const stoke_model *m, unsigned workers,
                             unsigned prefetch) {
  if (m->consumer_delay_ns <= 0) return m->t_c_ns;
  int64_t own = m->t_c_ns - m->consumer_delay_ns;
  if (own < 0) own = 0;
  unsigned k0 = m->prefetch ? m->prefetch : 1;
  double d0 = worker_cpu_demand(m, m->n_workers, k0, own + m->copy_ns);
  double d1 = worker_cpu_demand(m, workers, prefetch, own + m->copy_ns);
  /* No CPU demand of ours at the run's W: whatever held the cores was not
  ** our workers, and stays. */
  double scale = d0 > 0 ? d1 / d0 : 1;
  if (scale > 4) scale = 4;
  return own + (int64_t)((double)m->consumer_delay_ns * scale);
}

int stoke_predict_step(const stoke_model *m_in, unsigned workers,
                       unsigned prefetch, stoke_prediction *out) {
  if (!m_in || !out || prefetch < 1 || m_in->batch_size < 1 ||
      m_in->chunk < 1)
    return STOKE_EINVAL;
  stoke_model adj = *m_in;
  adj.t_c_ns = consumer_step(m_in, workers, prefetch);
  const stoke_model *m = &adj;
  memset(out, 0, sizeof *out);
  out->n_workers = workers;
  out->prefetch = prefetch;
  int bound = STOKE_BOUND_NONE;
  out->producer_batch_ns =
      stoke__model_producer_batch(m, workers, prefetch, &bound);
  int64_t tc = m->t_c_ns + m->copy_ns;
  if (workers == 0) {
    /* Nothing overlaps: the batch is made inside next(), then the step. */
    out->step_ns = out->producer_batch_ns + tc;
    out->wait_ratio = out->step_ns > 0 ? (double)out->producer_batch_ns /
                                             (double)out->step_ns
                                       : 0.0;
    out->epoch_ns = (int64_t)m->n_batches * out->step_ns;
    out->bound = STOKE_BOUND_INLINE;
    return 0;
  }
  out->bound = out->producer_batch_ns > tc ? bound : STOKE_BOUND_CONSUMER;
  /* Epochs as the loader runs them when they are short enough to replay
  ** whole; otherwise a steady-state window scaled to the epoch. */
  size_t nb = m->n_batches ? m->n_batches : 256;
  size_t per_epoch = nb * m->batch_size;
  unsigned epochs;
  if (per_epoch > SIM_MAX_SAMPLES / 2) {
    nb = SIM_MAX_SAMPLES / 2 / m->batch_size;
    if (nb < 4) nb = 4;
    epochs = 2;
  } else {
    epochs = (unsigned)(SIM_MAX_SAMPLES / per_epoch);
    if (epochs > 64) epochs = 64;
    if (epochs < 2) epochs = 2;
  }
  sim_out so;
  simulate(m, workers, prefetch, nb, epochs, &so);
  out->step_ns = (int64_t)so.step_ns;
  out->wait_ratio = so.wait_ratio;
  out->epoch_ns = m->n_batches ? (int64_t)(so.step_ns * (double)m->n_batches)
                               : 0;
  return 0;
}
