/* stats.c — merging per-thread counters into snapshots and the public view.
** Producer and consumer stats have one writer each; snapshots read them
** with relaxed atomics from any thread and sum them. */
#include "internal.h"

#include <string.h>

void stoke__stats_snap_producer(const stoke__producer_stats *p,
                                stoke__stats_snap *acc) {
  for (int s = 0; s < STOKE_STAGE_COUNT; s++)
    stoke__hist_read(&p->stage[s], &acc->stage[s]);
  acc->busy_ns += stoke__counter_get(&p->busy_ns);
  acc->cpu_ns += stoke__counter_get(&p->cpu_ns);
  acc->chunks += stoke__counter_get(&p->chunks);
  acc->produced += stoke__counter_get(&p->samples);
}

void stoke__stats_snap_consumer(const stoke__consumer_stats *c,
                                stoke__stats_snap *acc) {
  stoke__hist_read(&c->wait, &acc->wait);
  stoke__hist_read(&c->compute, &acc->compute);
  for (int i = 0; i < STOKE__DEPTH_BINS; i++)
    acc->depth[i] += stoke__counter_get(&c->depth[i]);
  acc->steps += stoke__counter_get(&c->steps);
  acc->samples += stoke__counter_get(&c->samples);
  acc->bytes += stoke__counter_get(&c->bytes);
}

void stoke__stats_snap_sub(stoke__stats_snap *a, const stoke__stats_snap *b) {
  for (int s = 0; s < STOKE_STAGE_COUNT; s++)
    stoke__hist_sub(&a->stage[s], &b->stage[s]);
  stoke__hist_sub(&a->wait, &b->wait);
  stoke__hist_sub(&a->compute, &b->compute);
  for (int i = 0; i < STOKE__DEPTH_BINS; i++) a->depth[i] -= b->depth[i];
  a->busy_ns -= b->busy_ns;
  a->cpu_ns -= b->cpu_ns;
  a->chunks -= b->chunks;
  a->produced -= b->produced;
  a->steps -= b->steps;
  a->samples -= b->samples;
  a->bytes -= b->bytes;
}

void stoke__stats_publish(const stoke__stats_snap *s, stoke_stats *out) {
  size_t size = out->struct_size;
  memset(out, 0, sizeof *out);
  out->struct_size = size;
  out->steps = s->steps;
  out->samples = s->samples;
  out->bytes = s->bytes;
  stoke__hist_dist(&s->wait, &out->wait);
  stoke__hist_dist(&s->compute, &out->compute);
  double w = (double)s->wait.sum, c = (double)s->compute.sum;
  out->wait_ratio = w + c > 0 ? w / (w + c) : 0.0;
  uint64_t calls = 0, weighted = 0;
  for (int i = 0; i < STOKE__DEPTH_BINS; i++) {
    out->queue_depth_hist[i] = s->depth[i];
    calls += s->depth[i];
    weighted += (uint64_t)i * s->depth[i];
  }
  if (calls) {
    out->queue_empty_frac = (double)s->depth[0] / (double)calls;
    out->queue_mean_depth = (double)weighted / (double)calls;
  }
  for (int st = 0; st < STOKE_STAGE_COUNT; st++)
    stoke__hist_dist(&s->stage[st], &out->stage[st]);
  out->worker_busy_ns = (int64_t)s->busy_ns;
  out->worker_cpu_ns = (int64_t)s->cpu_ns;
  out->chunks = s->chunks;
}

const char *stoke_stage_name(int stage) {
  static const char *const names[STOKE_STAGE_COUNT] = {
      "read",   "decode",   "transform", "slot_wait",
      "copy",   "python",   "gil_wait",  "collate"};
  if (stage < 0 || stage >= STOKE_STAGE_COUNT) return "?";
  return names[stage];
}
