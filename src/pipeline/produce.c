/* produce.c — one sample through its source, with its stages timed.
**
** Example echoing asks for s->copies copies of the sample, copy j with the
** stream stoke__copy_rng(rng, j) and its fields at copy_step[f] bytes
** apart: a source that shares work between copies (one read and decode for
** every crop of an image) fills them all at once (ops->fill_copies); for
** any other source each copy is a fill of its own. */
#include "pipeline/pipeline.h"

#include <string.h>

/* Every copy through the plain fill. */
static int fill_each(stoke_source *src, stoke_sample *s) {
  void *dst[STOKE__MAX_FIELDS];
  memcpy(dst, s->dst, sizeof dst);
  stoke_rng base = *stoke__sample_rng(s);
  int rc = 0;
  for (unsigned j = 0; rc == 0 && j < s->copies; j++) {
    for (size_t f = 0; f < src->n_fields; f++)
      s->dst[f] = (char *)dst[f] + j * s->copy_step[f];
    stoke__copy_rng(&base, j, &s->rng);
    rc = src->ops->fill(src, s);
  }
  memcpy(s->dst, dst, sizeof dst);
  return rc;
}

/* Example echoing's copies (s->copies > 1). */
static int fill_copies(stoke_source *src, stoke_sample *s) {
  if (src->ops->fill_copies) return src->ops->fill_copies(src, s);
  return fill_each(src, s);
}

/* One sample, its copies included.  Inline: the plain fill is the hot
** path, one call straight to the source. */
static inline int fill(stoke_source *src, stoke_sample *s) {
  return s->copies <= 1 ? src->ops->fill(src, s) : fill_copies(src, s);
}

/* The stored image's size, for the doctor's pre-resize advice, counted
** when the fill succeeded.  An image source sets it in each fill; it is
** zeroed here once seen, so that every fill starts from 0 and a source
** that sets none costs one test per sample, not two stores and a test. */
static inline void count_image(stoke_sample *s, stoke__producer_stats *ps,
                               int rc) {
  if (!s->src_w) return;
  if (rc == 0 && s->src_h) {
    stoke__counter_add(&ps->images, 1);
    stoke__counter_add(&ps->image_pixels, (uint64_t)s->src_w * s->src_h);
    stoke__counter_add(&ps->image_sides, STOKE__MAX(s->src_w, s->src_h));
  }
  s->src_w = s->src_h = 0;
}

int stoke__produce(stoke_source *src, stoke_sample *s,
                   stoke__producer_stats *ps, bool timed) {
  s->failed = false;
  s->stage = STOKE_STAGE_READ;
  s->timed = timed;
  if (!timed) {
    /* The caller times the whole chunk (cheap samples); see fill_chunk. */
    int rc = fill(src, s);
    count_image(s, ps, rc);
    return rc != 0 ? STOKE_ESAMPLE : 0;
  }
  memset(s->stage_ns, 0, sizeof s->stage_ns);
  s->mark_ns = stoke__now_ns();
  int rc = fill(src, s);
  int64_t end = stoke__now_ns();
  stoke__trace_push(s->trace, s->stage, s->mark_ns, end - s->mark_ns,
                    s->index, 1);
  s->stage_ns[s->stage] += end - s->mark_ns;
  /* READ is counted for every sample so that its count is the number of
  ** samples produced; the other stages only when a source used them. */
  stoke__hist_add(&ps->stage[STOKE_STAGE_READ],
                  (uint64_t)s->stage_ns[STOKE_STAGE_READ]);
  for (int st = STOKE_STAGE_DECODE; st < STOKE_STAGE_COUNT; st++)
    if (s->stage_ns[st] > 0 && st != STOKE_STAGE_READ &&
        stoke__stage_is_work(st))
      stoke__hist_add(&ps->stage[st], (uint64_t)s->stage_ns[st]);
  stoke__counter_add(&ps->samples, 1);
  count_image(s, ps, rc);
  return rc != 0 ? STOKE_ESAMPLE : 0;
}
