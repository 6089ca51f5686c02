/* synthetic.c — sources with a known per-sample cost, for measurement and
** for the diagnosis's ground truth.
**
**   SLEEP   the cost is spent sleeping: I/O-like, scales past the cores;
**   SPIN    the cost is spent burning the thread's CPU time: scales only up
**           to the cores, as decode and augmentation do;
**   TENSOR  no cost: features generated once and held in memory.
**
** A sample's cost is drawn from its own stream (seed ^ COST_SALT, epoch,
** index), so stoke_source_synthetic_cost() can say in advance what any
** sample will cost. */
#include "source/source.h"
#include "os/os.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define COST_SALT 0xC057C057C057C057ULL

typedef struct synth_impl {
  stoke_synthetic_config cfg;
  float *features;   /* TENSOR: n_samples x x-size, owned */
  size_t x_elems;
} synth_impl;

void stoke_synthetic_config_init(stoke_synthetic_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->kind = STOKE_SYNTH_SLEEP;
  cfg->cost_ns = 5000000;
  cfg->dist = STOKE_COST_FIXED;
  cfg->sigma = 1.0;
  cfg->n_samples = 256;
  cfg->ndim = 3;
  cfg->shape[0] = 3;
  cfg->shape[1] = 32;
  cfg->shape[2] = 32;
  cfg->n_classes = 2;
  cfg->rare_frac = 0.02;
  cfg->rare_factor = 20;
}

static int64_t draw_cost(const stoke_synthetic_config *c, uint64_t seed,
                         uint64_t epoch, size_t index) {
  if (c->kind == STOKE_SYNTH_TENSOR || c->cost_ns <= 0) return 0;
  double mean = (double)c->cost_ns;
  stoke_rng rng;
  stoke_rng_init(&rng, seed ^ COST_SALT, epoch, index);
  switch (c->dist) {
  case STOKE_COST_EXP:
    return (int64_t)(-mean * log(1.0 - stoke_rng_uniform(&rng)));
  case STOKE_COST_LOGNORMAL: {
    /* mu chosen so that the mean is cost_ns: E = exp(mu + sigma^2 / 2). */
    double mu = log(mean) - c->sigma * c->sigma / 2.0;
    return (int64_t)exp(mu + c->sigma * stoke_rng_normal(&rng));
  }
  case STOKE_COST_RARE: {
    /* base x (1 - f + f x r) = mean. */
    double base = mean / (1.0 - c->rare_frac + c->rare_frac * c->rare_factor);
    bool rare = stoke_rng_uniform(&rng) < c->rare_frac;
    return (int64_t)(rare ? base * c->rare_factor : base);
  }
  default: return c->cost_ns;
  }
}

int64_t stoke_source_synthetic_cost(const stoke_source *src, uint64_t seed,
                                    uint64_t epoch, size_t index) {
  if (!src || strcmp(src->kind, "synthetic") != 0) return 0;
  const synth_impl *s = src->impl;
  return draw_cost(&s->cfg, seed, epoch, index);
}

/* Uniform [0, 1) noise, as torch.rand.  A xorshift64* stream seeded from
** the sample's stream: ~1 ns per value instead of a counter-based draw
** each, so filling the sample stays small next to its simulated cost. */
static void fill_noise(float *x, size_t n, uint64_t seed) {
  uint64_t st = seed | 1;
  for (size_t i = 0; i < n; i++) {
    st ^= st >> 12;
    st ^= st << 25;
    st ^= st >> 27;
    x[i] = (float)((st * 0x2545F4914F6CDD1DULL) >> 40) * 0x1.0p-24f;
  }
}

/* Sleep so that the sample really costs `ns` of wall time.  A virtual
** machine wakes a sleeper ~100 us late (2% of 5 ms), which would make
** sleep:5ms mean 5.1 ms; each thread learns its overshoot (EWMA) and
** sleeps that much less. */
static void sleep_calibrated(stoke_sample *s, int64_t ns) {
  int64_t bias = s->sleep_bias_ns;
  if (bias > ns / 2) bias = ns / 2;
  int64_t asked = ns - bias, t0 = stoke__now_ns();
  stoke__sleep_ns(asked);
  int64_t over = stoke__now_ns() - t0 - asked;
  s->sleep_bias_ns += (over - s->sleep_bias_ns) / 8;
  if (s->sleep_bias_ns < 0) s->sleep_bias_ns = 0;
}

/* The sample's cost, spent as its kind says (not TENSOR).  Inline, and
** the draw skipped when there is none: spin:0 is bench/overhead.sh's empty
** sample, where a call and a branch per sample show. */
static inline void spend_cost(const stoke_synthetic_config *c,
                              stoke_sample *s) {
  if (c->cost_ns > 0) {
    int64_t cost = draw_cost(c, s->seed, s->epoch, s->index);
    if (c->kind == STOKE_SYNTH_SLEEP)
      sleep_calibrated(s, cost);
    else
      stoke__spin_cpu_ns(cost);
  }
  if (c->wait_ns > 0) sleep_calibrated(s, c->wait_ns);
}

static inline int64_t label_of(const stoke_synthetic_config *c,
                               size_t index) {
  return (int64_t)(index % (c->n_classes ? c->n_classes : 1));
}

/* The sample's copies (example echoing) share its cost, as the copies of
** an image share its read and decode: the cost once, then each copy's
** noise from its own stream.  Copy 0's stream is the sample's own
** (stoke__copy_rng), so copy 0 is byte for byte what synth_fill writes. */
static int synth_fill_copies(stoke_source *src, stoke_sample *s) {
  const synth_impl *impl = src->impl;
  const stoke_synthetic_config *c = &impl->cfg;
  unsigned copies = s->copies > 1 ? s->copies : 1;
  if (c->kind != STOKE_SYNTH_TENSOR) spend_cost(c, s);
  stoke_rng base = *stoke__sample_rng(s);
  int64_t label = label_of(c, s->index);
  for (unsigned j = 0; j < copies; j++) {
    float *x = (float *)((char *)s->dst[0] + j * s->copy_step[0]);
    if (c->kind == STOKE_SYNTH_TENSOR) {
      memcpy(x, impl->features + s->index * impl->x_elems,
             impl->x_elems * sizeof(float));
    } else {
      stoke_rng r;
      stoke__copy_rng(&base, j, &r);
      fill_noise(x, impl->x_elems, stoke_rng_u64(&r));
    }
    memcpy((char *)s->dst[1] + j * s->copy_step[1], &label, sizeof label);
  }
  return 0;
}

/* One sample, one copy (the loader calls fill_copies for more): the
** loader's own cost is measured through this path (bench/overhead.sh,
** bench/hotpath.sh), so it does only what the sample needs. */
static int synth_fill(stoke_source *src, stoke_sample *s) {
  const synth_impl *impl = src->impl;
  const stoke_synthetic_config *c = &impl->cfg;
  int64_t label = label_of(c, s->index);
  if (c->kind == STOKE_SYNTH_TENSOR) {
    /* In-memory tensors: one copy of the stored sample and its label, no
    ** cost to draw and no stream derived. */
    memcpy(s->dst[0], impl->features + s->index * impl->x_elems,
           impl->x_elems * sizeof(float));
  } else {
    spend_cost(c, s);
    /* The stream itself, not a copy: nothing reads it after the fill. */
    fill_noise(s->dst[0], impl->x_elems, stoke_rng_u64(stoke__sample_rng(s)));
  }
  memcpy(s->dst[1], &label, sizeof label);
  return 0;
}

static bool synth_deterministic(const stoke_source *src) {
  const synth_impl *impl = src->impl;
  return impl->cfg.kind == STOKE_SYNTH_TENSOR;
}

static void synth_destroy(stoke_source *src) {
  synth_impl *s = src->impl;
  if (!s) return;
  stoke__free(NULL, s->features);
  stoke__free(NULL, s);
}

static const stoke__source_ops synth_ops = {
    .fill = synth_fill,
    .destroy = synth_destroy,
    .fill_copies = synth_fill_copies,
    .deterministic = synth_deterministic};

int stoke_source_create_synthetic(const stoke_synthetic_config *cfg,
                                  stoke_source **out) {
  if (!out)
    return stoke__set_tls_error(STOKE_EINVAL, "synthetic source: out is NULL");
  *out = NULL;
  if (!cfg || cfg->struct_size != sizeof *cfg)
    return stoke__set_tls_error(
        STOKE_EINVAL,
        "synthetic source: cfg is NULL or not set up by "
        "stoke_synthetic_config_init (struct_size)");
  if (cfg->kind < STOKE_SYNTH_SLEEP || cfg->kind > STOKE_SYNTH_TENSOR)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "synthetic source: unknown kind %d", cfg->kind);
  if (cfg->dist == STOKE_COST_RARE &&
      !(cfg->rare_frac > 0 && cfg->rare_frac < 1 && cfg->rare_factor >= 1 &&
        cfg->rare_factor <= 1e6))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "synthetic source: rare_frac %g must be in "
                                "(0, 1) and rare_factor %g in [1, 1e6]",
                                cfg->rare_frac, cfg->rare_factor);
  if (cfg->dist < STOKE_COST_FIXED || cfg->dist > STOKE_COST_RARE)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "synthetic source: unknown cost dist %d",
                                cfg->dist);
  if (cfg->wait_ns < 0 || (cfg->wait_ns > 0 && cfg->kind == STOKE_SYNTH_TENSOR))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "synthetic source: wait_ns %lld (it must be "
                                "at least 0, and 0 for tensor)",
                                (long long)cfg->wait_ns);
  if (cfg->cost_ns < 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "synthetic source: negative cost_ns %lld",
                                (long long)cfg->cost_ns);
  if (cfg->dist == STOKE_COST_LOGNORMAL && !(cfg->sigma > 0 && cfg->sigma < 10))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "synthetic source: lognormal sigma %g is not "
                                "in (0, 10)", cfg->sigma);
  if (cfg->n_classes == 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "synthetic source: n_classes is 0");
  stoke_field_desc fields[2];
  memset(fields, 0, sizeof fields);
  fields[0].name = "x";
  fields[0].dtype = STOKE_F32;
  fields[0].ndim = cfg->ndim;
  if (cfg->ndim >= 0 && cfg->ndim <= STOKE_MAX_DIMS)
    memcpy(fields[0].shape, cfg->shape, sizeof(int64_t) * (size_t)cfg->ndim);
  fields[1].name = "y";
  fields[1].dtype = STOKE_I64;
  fields[1].ndim = 0;

  stoke_source *src = stoke__calloc(NULL, 1, sizeof *src);
  if (!src)
    return stoke__set_tls_error(STOKE_ENOMEM, "synthetic source: out of memory");
  int rc = stoke__source_init(src, "synthetic", cfg->n_samples, 2, fields);
  synth_impl *impl = NULL;
  if (rc == 0) {
    impl = stoke__calloc(NULL, 1, sizeof *impl);
    if (!impl) rc = STOKE_ENOMEM;
  }
  if (rc == 0) {
    impl->cfg = *cfg;
    impl->x_elems = src->field_bytes[0] / sizeof(float);
    src->impl = impl;
    src->ops = &synth_ops;
    if (cfg->kind == STOKE_SYNTH_TENSOR) {
      impl->features = stoke__calloc(NULL, cfg->n_samples,
                                     src->field_bytes[0]);
      if (!impl->features) {
        rc = STOKE_ENOMEM;
      } else {
        stoke_rng rng;
        stoke_rng_init(&rng, cfg->seed, 0, 0);
        size_t n = cfg->n_samples * impl->x_elems;
        for (size_t i = 0; i < n; i++)
          impl->features[i] = (float)stoke_rng_normal(&rng);
      }
    }
  }
  if (rc == STOKE_ENOMEM)
    stoke__set_tls_error(rc, "synthetic source: out of memory");
  if (rc != 0) {
    stoke__source_release(src);
    return rc;
  }
  *out = src;
  return 0;
}
