/* stats.c — merging per-thread counters into snapshots and the public view.
** Producer and consumer stats have one writer each; snapshots read them
** with relaxed atomics from any thread and sum them. */
#include "stats/stats.h"

#include <string.h>

void stoke__stats_snap_producer(const stoke__producer_stats *p,
                                stoke__stats_snap *acc) {
  for (int s = 0; s < STOKE_STAGE_COUNT; s++)
    stoke__hist_read(&p->stage[s], &acc->stage[s]);
  acc->busy_ns += stoke__counter_get(&p->busy_ns);
  acc->cpu_ns += stoke__counter_get(&p->cpu_ns);
  acc->chunks += stoke__counter_get(&p->chunks);
  acc->produced += stoke__counter_get(&p->samples);
  acc->copy_bytes += stoke__counter_get(&p->copy_bytes);
  acc->pageable_copies += stoke__counter_get(&p->pageable_copies);
  acc->images += stoke__counter_get(&p->images);
  acc->image_pixels += stoke__counter_get(&p->image_pixels);
  acc->image_sides += stoke__counter_get(&p->image_sides);
  acc->cache_hits += stoke__counter_get(&p->cache_hits);
  acc->ram_hits += stoke__counter_get(&p->ram_hits);
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
  stoke__hist_read(&c->host_wait, &acc->host_wait);
  stoke__hist_read(&c->host_compute, &acc->host_compute);
  stoke__hist_read(&c->copy_wait, &acc->copy_wait);
  stoke__hist_read(&c->gpu_idle, &acc->gpu_idle);
  acc->untimed_steps += stoke__counter_get(&c->untimed_steps);
  acc->idle_steps += stoke__counter_get(&c->idle_steps);
  acc->fresh_samples += stoke__counter_get(&c->fresh_samples);
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
  stoke__hist_sub(&a->host_wait, &b->host_wait);
  stoke__hist_sub(&a->host_compute, &b->host_compute);
  stoke__hist_sub(&a->copy_wait, &b->copy_wait);
  stoke__hist_sub(&a->gpu_idle, &b->gpu_idle);
  a->copy_bytes -= b->copy_bytes;
  a->pageable_copies -= b->pageable_copies;
  a->untimed_steps -= b->untimed_steps;
  a->idle_steps -= b->idle_steps;
  a->images -= b->images;
  a->image_pixels -= b->image_pixels;
  a->image_sides -= b->image_sides;
  a->cache_hits -= b->cache_hits;
  a->ram_hits -= b->ram_hits;
  a->fresh_samples -= b->fresh_samples;
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
  stoke__hist_dist(&s->host_wait, &out->host_wait);
  stoke__hist_dist(&s->host_compute, &out->host_compute);
  stoke__hist_dist(&s->copy_wait, &out->copy_wait);
  stoke__hist_dist(&s->gpu_idle, &out->gpu_idle);
  out->copy_bytes = s->copy_bytes;
  out->pageable_copies = s->pageable_copies;
  out->untimed_steps = s->untimed_steps;
  out->fresh_samples = s->fresh_samples;
  out->images = s->images;
  if (s->images) {
    out->image_pixels_mean = (double)s->image_pixels / (double)s->images;
    out->image_side_mean = (double)s->image_sides / (double)s->images;
  }
  out->cache_hits = s->cache_hits;
  out->ram_cache_hits = s->ram_hits;
  int64_t copy = out->stage[STOKE_STAGE_COPY].total_ns;
  int64_t exposed = out->copy_wait.total_ns;
  if (copy > 0) {
    out->copy_hidden_ns = copy > exposed ? copy - exposed : 0;
    out->copy_overlap = (double)out->copy_hidden_ns / (double)copy;
  }
  double idle = (double)out->gpu_idle.total_ns;
  if (out->gpu_idle.count && idle + c > 0)
    out->gpu_idle_frac = idle / (idle + c);
  /* With the EVENTS clock the queue that matters is the stream's: a step
  ** that found its batch not ready is one whose stream idled before it.
  ** (The host's queue is empty whenever the GPU holds the host back.) */
  if (s->clock_events && s->gpu_idle.count)
    out->queue_empty_frac =
        (double)s->idle_steps / (double)s->gpu_idle.count;
}


void stoke__stats_step_dist(const stoke__consumer_stats *c,
                            const stoke_allocator *a, stoke_dist *out) {
  memset(out, 0, sizeof *out);
  if (!c->step) return;
  /* Read apart from the snapshot, which every loader holds one of: the
  ** step histogram is there only with the metrics on. */
  stoke__hist_snap *h = stoke__calloc(a, 1, sizeof *h);
  if (!h) return; /* out of memory: no step quantiles this time */
  stoke__hist_read(c->step, h);
  stoke__hist_dist(h, out);
  stoke__free(a, h);
}
