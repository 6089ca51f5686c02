/* source.c — what every source shares: field descriptions, reference
** counting, and the sample handle given to fill callbacks.  Sources are
** shared between the caller and every loader using them, so the last
** reference frees them. */
#include "source/source.h"
#include "os/os.h"
#include "stats/stats.h"

#include <stdio.h>
#include <string.h>

int stoke__source_init(stoke_source *src, const char *kind, size_t n_samples,
                       size_t n_fields, const stoke_field_desc *fields) {
  /* First, so that a failure below still frees src on release. */
  atomic_init(&src->refs, 1);
  src->kind = kind;
  if (!fields)
    return stoke__set_tls_error(STOKE_EINVAL, "%s source: fields is NULL",
                                kind);
  if (n_samples == 0)
    return stoke__set_tls_error(STOKE_EINVAL, "%s source: no samples", kind);
  if (n_fields == 0 || n_fields > STOKE__MAX_FIELDS)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "%s source: n_fields is %zu, expected 1..%d",
                                kind, n_fields, STOKE__MAX_FIELDS);
  src->n_samples = n_samples;
  src->n_fields = n_fields;
  for (size_t f = 0; f < n_fields; f++) {
    const stoke_field_desc *d = &fields[f];
    if (stoke_dtype_size(d->dtype) == 0)
      return stoke__set_tls_error(STOKE_EINVAL,
                                  "%s source: field %zu has unknown dtype %d",
                                  kind, f, d->dtype);
    if (d->ndim < 0 || d->ndim > STOKE_MAX_DIMS)
      return stoke__set_tls_error(STOKE_EINVAL,
                                  "%s source: field %zu has ndim %d, expected "
                                  "0..%d", kind, f, d->ndim, STOKE_MAX_DIMS);
    for (int i = 0; i < d->ndim; i++)
      if (d->shape[i] <= 0)
        return stoke__set_tls_error(
            STOKE_EINVAL, "%s source: field %zu has shape[%d] = %lld, "
            "expected > 0", kind, f, i, (long long)d->shape[i]);
    size_t bytes = stoke__field_bytes(d);
    if (bytes == 0)
      return stoke__set_tls_error(STOKE_EINVAL,
                                  "%s source: field %zu is too large", kind, f);
    src->fields[f] = *d;
    char fallback[16];
    snprintf(fallback, sizeof fallback, "f%zu", f);
    src->fields[f].name =
        stoke__strdup(src->alloc, d->name ? d->name : fallback);
    if (!src->fields[f].name)
      return stoke__set_tls_error(STOKE_ENOMEM, "%s source: out of memory",
                                  kind);
    src->field_bytes[f] = bytes;
  }
  return 0;
}

void stoke__source_retain(stoke_source *src) {
  atomic_fetch_add_explicit(&src->refs, 1, memory_order_relaxed);
}

void stoke__source_release(stoke_source *src) {
  if (!src) return;
  /* acq_rel: the freeing thread must see every other holder's writes. */
  if (atomic_fetch_sub_explicit(&src->refs, 1, memory_order_acq_rel) != 1)
    return;
  if (src->ops && src->ops->destroy) src->ops->destroy(src);
  const stoke_allocator *a = src->alloc;
  for (size_t f = 0; f < src->n_fields; f++)
    stoke__free(a, (void *)src->fields[f].name);
  stoke__free(a, src);
}

void stoke_source_destroy(stoke_source *src) { stoke__source_release(src); }

size_t stoke_source_n_samples(const stoke_source *src) {
  return src ? src->n_samples : 0;
}

size_t stoke_source_n_fields(const stoke_source *src) {
  return src ? src->n_fields : 0;
}

const stoke_field_desc *stoke_source_field(const stoke_source *src, size_t f) {
  if (!src || f >= src->n_fields) return NULL;
  return &src->fields[f];
}

/* ---- the sample handle ---------------------------------------------------- */

size_t stoke_sample_index(const stoke_sample *s) { return s->index; }
uint64_t stoke_sample_epoch(const stoke_sample *s) { return s->epoch; }
stoke_rng *stoke_sample_rng(stoke_sample *s) { return stoke__sample_rng(s); }

void *stoke_sample_field(stoke_sample *s, size_t f) {
  if (f >= STOKE__MAX_FIELDS) return NULL;
  return s->dst[f];
}

const stoke_batch *stoke_sample_batch(const stoke_sample *s) {
  return s->batch;
}
size_t stoke_sample_position(const stoke_sample *s) { return s->pos; }

/* ---- queries every source answers (through its ops, where it has them) -- */

const char *stoke_source_kind(const stoke_source *src) {
  return src ? src->kind : "";
}

void stoke_source_describe(const stoke_source *src, size_t index, char *buf,
                           size_t cap) {
  if (!buf || cap == 0) return;
  buf[0] = '\0';
  if (src && index < src->n_samples && src->ops && src->ops->describe)
    src->ops->describe(src, index, buf, cap);
}

size_t stoke_source_n_classes(const stoke_source *src) {
  if (!src || !src->ops || !src->ops->n_classes) return 0;
  return src->ops->n_classes(src);
}

const char *stoke_source_class_name(const stoke_source *src, size_t c) {
  if (!src || !src->ops || !src->ops->class_name) return NULL;
  return src->ops->class_name(src, c);
}

int64_t stoke_source_label(const stoke_source *src, size_t index) {
  if (!src || !src->ops || !src->ops->label || index >= src->n_samples)
    return -1;
  return src->ops->label(src, index);
}

void stoke_sample_stage(stoke_sample *s, int stage) {
  if (!stoke__stage_is_work(stage)) return;
  if (!s->timed) return; /* a cheap sample, timed with its chunk */
  int64_t now = stoke__now_ns();
  stoke__trace_push(s->trace, s->stage, s->mark_ns, now - s->mark_ns,
                    s->index, 1);
  s->stage_ns[s->stage] += now - s->mark_ns;
  s->mark_ns = now;
  s->stage = stage;
}

int stoke_sample_fail(stoke_sample *s, const char *fmt, ...) {
  s->failed = true;
  if (s->err && s->err_cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, s->err_cap, fmt, ap);
    va_end(ap);
  }
  return STOKE_ESAMPLE;
}

/* ---- in-memory tensors ------------------------------------------------------ */

typedef struct tensors_impl {
  const void *data[STOKE__MAX_FIELDS]; /* borrowed */
} tensors_impl;

static int tensors_fill(stoke_source *src, stoke_sample *s) {
  const tensors_impl *t = src->impl;
  for (size_t f = 0; f < src->n_fields; f++) {
    size_t n = src->field_bytes[f];
    memcpy(s->dst[f], (const char *)t->data[f] + s->index * n, n);
  }
  return 0;
}

static void tensors_destroy(stoke_source *src) { stoke__free(NULL, src->impl); }

static const stoke__source_ops tensors_ops = {.fill = tensors_fill,
                                              .destroy = tensors_destroy};

static int finish_create(stoke_source *src, int rc, stoke_source **out) {
  if (rc != 0) {
    src->ops = NULL; /* impl not set up: free only the common part */
    stoke__source_release(src);
    return rc;
  }
  *out = src;
  return 0;
}

int stoke_source_create_tensors(size_t n_samples, size_t n_fields,
                                const stoke_field_desc *fields,
                                const void *const *data, stoke_source **out) {
  if (!out) return stoke__set_tls_error(STOKE_EINVAL, "tensors source: out is NULL");
  *out = NULL;
  if (!data)
    return stoke__set_tls_error(STOKE_EINVAL, "tensors source: data is NULL");
  stoke_source *src = stoke__calloc(NULL, 1, sizeof *src);
  if (!src) return stoke__set_tls_error(STOKE_ENOMEM, "tensors source: out of memory");
  int rc = stoke__source_init(src, "tensors", n_samples, n_fields, fields);
  for (size_t f = 0; rc == 0 && f < n_fields; f++) {
    size_t total;
    if (!data[f])
      rc = stoke__set_tls_error(STOKE_EINVAL,
                                "tensors source: data[%zu] is NULL", f);
    else if (!stoke__mul_ok(n_samples, src->field_bytes[f], &total))
      rc = stoke__set_tls_error(STOKE_EINVAL,
                                "tensors source: field %zu is too large", f);
  }
  tensors_impl *t = NULL;
  if (rc == 0) {
    t = stoke__calloc(NULL, 1, sizeof *t);
    if (!t) rc = stoke__set_tls_error(STOKE_ENOMEM, "tensors source: out of memory");
  }
  if (rc == 0) {
    for (size_t f = 0; f < n_fields; f++) t->data[f] = data[f];
    src->impl = t;
    src->ops = &tensors_ops;
  }
  return finish_create(src, rc, out);
}

/* ---- user callback ------------------------------------------------------------ */

typedef struct callback_impl {
  stoke_callback_config cfg; /* fields not kept: copied by source_init */
} callback_impl;

static int callback_fill(stoke_source *src, stoke_sample *s) {
  const callback_impl *c = src->impl;
  int rc = c->cfg.fill(c->cfg.user, s);
  if (rc != 0 && !s->failed)
    stoke_sample_fail(s, "the fill callback returned %d", rc);
  return rc != 0 ? STOKE_ESAMPLE : 0;
}

static void callback_destroy(stoke_source *src) {
  callback_impl *c = src->impl;
  if (c->cfg.destroy) c->cfg.destroy(c->cfg.user);
  stoke__free(NULL, c);
}

static int callback_thread_start(stoke_source *src, unsigned worker,
                                 char *err, size_t cap) {
  const callback_impl *c = src->impl;
  return c->cfg.thread_start ? c->cfg.thread_start(c->cfg.user, worker, err,
                                                   cap)
                             : 0;
}

static void callback_thread_stop(stoke_source *src, unsigned worker) {
  const callback_impl *c = src->impl;
  if (c->cfg.thread_stop) c->cfg.thread_stop(c->cfg.user, worker);
}

static int callback_batch_done(stoke_source *src, const stoke_batch *b,
                               char *err, size_t cap) {
  const callback_impl *c = src->impl;
  return c->cfg.batch_done(c->cfg.user, b, err, cap);
}

static const stoke__source_ops callback_ops = {.fill = callback_fill,
                                               .destroy = callback_destroy};
/* With hooks: the pipeline calls only those present (batch_done costs a
** lock per batch even when it does nothing). */
static const stoke__source_ops callback_hook_ops = {
    .fill = callback_fill,
    .destroy = callback_destroy,
    .thread_start = callback_thread_start,
    .thread_stop = callback_thread_stop};
static const stoke__source_ops callback_batch_ops = {
    .fill = callback_fill,
    .destroy = callback_destroy,
    .thread_start = callback_thread_start,
    .thread_stop = callback_thread_stop,
    .batch_done = callback_batch_done};

void stoke_callback_config_init(stoke_callback_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
}

int stoke_source_create_callback_ex(const stoke_callback_config *cfg,
                                    stoke_source **out) {
  if (!out) return stoke__set_tls_error(STOKE_EINVAL, "callback source: out is NULL");
  *out = NULL;
  if (!cfg || cfg->struct_size != sizeof *cfg)
    return stoke__set_tls_error(
        STOKE_EINVAL, "callback source: cfg is NULL or its struct_size is "
        "wrong (call stoke_callback_config_init)");
  if (!cfg->fill)
    return stoke__set_tls_error(STOKE_EINVAL, "callback source: fill is NULL");
  stoke_source *src = stoke__calloc(NULL, 1, sizeof *src);
  if (!src) return stoke__set_tls_error(STOKE_ENOMEM, "callback source: out of memory");
  int rc = stoke__source_init(src, "callback", cfg->n_samples, cfg->n_fields,
                              cfg->fields);
  callback_impl *c = NULL;
  if (rc == 0) {
    c = stoke__calloc(NULL, 1, sizeof *c);
    if (!c) rc = stoke__set_tls_error(STOKE_ENOMEM, "callback source: out of memory");
  }
  if (rc == 0) {
    c->cfg = *cfg;
    c->cfg.fields = NULL;
    src->impl = c;
    bool hooks = cfg->thread_start || cfg->thread_stop;
    src->ops = cfg->batch_done ? &callback_batch_ops
               : hooks         ? &callback_hook_ops
                               : &callback_ops;
  }
  return finish_create(src, rc, out);
}

int stoke_source_create_callback(size_t n_samples, size_t n_fields,
                                 const stoke_field_desc *fields,
                                 stoke_fill_fn fill, void *user,
                                 stoke_source **out) {
  stoke_callback_config cfg;
  stoke_callback_config_init(&cfg);
  cfg.n_samples = n_samples;
  cfg.n_fields = n_fields;
  cfg.fields = fields;
  cfg.fill = fill;
  cfg.user = user;
  return stoke_source_create_callback_ex(&cfg, out);
}

const struct stoke__http *stoke__source_http(const stoke_source *src) {
  return src->ops->http ? src->ops->http(src) : NULL;
}

bool stoke__source_rcache_counts(const stoke_source *src,
                                 struct stoke__rcache_counts *out) {
  return src->ops->rcache_counts && src->ops->rcache_counts(src, out);
}
