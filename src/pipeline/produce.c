/* produce.c — one sample through its source, with its stages timed. */
#include "internal.h"

#include <string.h>

int stoke__produce(stoke_source *src, stoke_sample *s,
                   stoke__producer_stats *ps, bool timed) {
  s->failed = false;
  s->stage = STOKE_STAGE_READ;
  s->timed = timed;
  if (!timed) {
    /* The caller times the whole chunk (cheap samples); see fill_chunk. */
    int rc = src->ops->fill(src, s);
    return rc != 0 ? STOKE_ESAMPLE : 0;
  }
  memset(s->stage_ns, 0, sizeof s->stage_ns);
  s->mark_ns = stoke__now_ns();
  int rc = src->ops->fill(src, s);
  int64_t end = stoke__now_ns();
  stoke__trace_push(s->trace, s->stage, s->mark_ns, end - s->mark_ns,
                    s->index, 1);
  s->stage_ns[s->stage] += end - s->mark_ns;
  /* READ is counted for every sample so that its count is the number of
  ** samples produced; the other stages only when a source used them. */
  stoke__hist_add(&ps->stage[STOKE_STAGE_READ],
                  (uint64_t)s->stage_ns[STOKE_STAGE_READ]);
  for (int st = STOKE_STAGE_DECODE; st < STOKE_STAGE_COUNT; st++)
    if (st != STOKE_STAGE_READ && stoke__stage_is_work(st) &&
        s->stage_ns[st] > 0)
      stoke__hist_add(&ps->stage[st], (uint64_t)s->stage_ns[st]);
  stoke__counter_add(&ps->samples, 1);
  return rc != 0 ? STOKE_ESAMPLE : 0;
}
