/* stage_block.c — a loader's per-sample stage counters in the caller's
** memory, for producers that are not the library's threads.
**
** stoke.DataLoader(worker_type="process") makes its samples in worker
** processes; to judge them as a loader's, the doctor needs what a worker
** thread measures (stoke__producer_stats).  The block is those structs, one
** per producer, behind a small header, in memory the caller maps (shared
** memory beside the slots): counters only, so every process may map it
** anywhere.  Each producer has one writer (single-writer counters, as the
** threads', race-free for readers through relaxed atomics), so the hot path
** takes no lock and no atomic read-modify-write.  Lock-free atomics are
** address-free (C11 7.17.5), which is what makes them valid across
** processes; the static assertion below keeps it so. */
#include "stats/stats.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "a stage block shared by processes needs lock-free 64-bit "
               "atomics");

#define STAGE_BLOCK_MAGIC 0x73746b5374616765ULL /* "stkStage" */
#define STAGE_BLOCK_MAX 4096                    /* producers */
#define STAGE_BLOCK_ALIGN 64                    /* a cache line each */

typedef struct stage_block_head {
  uint64_t magic;
  uint64_t n_producers;
  uint64_t stride;   /* bytes per producer: sizeof and layout guard */
  uint64_t pad[5];   /* the producers start on a cache line */
} stage_block_head;

static size_t stride(void) {
  size_t s = sizeof(stoke__producer_stats);
  return (s + STAGE_BLOCK_ALIGN - 1) / STAGE_BLOCK_ALIGN * STAGE_BLOCK_ALIGN;
}

size_t stoke_stage_block_bytes(unsigned n) {
  if (n == 0 || n > STAGE_BLOCK_MAX) return 0;
  return sizeof(stage_block_head) + (size_t)n * stride();
}

int stoke_stage_block_init(void *mem, size_t bytes, unsigned n) {
  size_t need = stoke_stage_block_bytes(n);
  if (!mem || !need || bytes < need ||
      (uintptr_t)mem % _Alignof(uint64_t) != 0)
    return STOKE_EINVAL;
  memset(mem, 0, need);
  stage_block_head *h = mem;
  h->n_producers = n;
  h->stride = stride();
  h->magic = STAGE_BLOCK_MAGIC;
  return 0;
}

static unsigned producers(const void *mem) {
  const stage_block_head *h = mem;
  if (!mem || h->magic != STAGE_BLOCK_MAGIC || h->stride != stride() ||
      h->n_producers == 0 || h->n_producers > STAGE_BLOCK_MAX)
    return 0;
  return (unsigned)h->n_producers;
}

static stoke__producer_stats *producer(const void *mem, unsigned w) {
  return (stoke__producer_stats *)((char *)mem + sizeof(stage_block_head) +
                                   (size_t)w * stride());
}

unsigned stoke__stage_block_producers(const void *mem) {
  return producers(mem);
}

int stoke_stage_block_record(void *mem, unsigned w,
                             const int64_t stage_ns[STOKE_STAGE_COUNT],
                             int64_t busy_ns, int64_t cpu_ns) {
  if (!stage_ns || w >= producers(mem)) return STOKE_EINVAL;
  stoke__producer_stats *p = producer(mem, w);
  for (int s = 0; s < STOKE_STAGE_COUNT; s++)
    if (stage_ns[s] >= 0) stoke__hist_add(&p->stage[s], (uint64_t)stage_ns[s]);
  if (busy_ns > 0) stoke__counter_add(&p->busy_ns, (uint64_t)busy_ns);
  if (cpu_ns > 0) stoke__counter_add(&p->cpu_ns, (uint64_t)cpu_ns);
  /* One claim per sample: the processes claim samples one at a time. */
  stoke__counter_add(&p->chunks, 1);
  stoke__counter_add(&p->samples, 1);
  return 0;
}

int64_t stoke__stage_block_cpu_ns(const void *mem) {
  unsigned n = producers(mem);
  uint64_t sum = 0;
  for (unsigned w = 0; w < n; w++)
    sum += stoke__counter_get(&producer(mem, w)->cpu_ns);
  return (int64_t)sum;
}

bool stoke__stage_block_read(const void *mem, stoke__stats_snap *acc) {
  unsigned n = producers(mem);
  for (unsigned w = 0; w < n; w++)
    stoke__stats_snap_producer(producer(mem, w), acc);
  return n > 0;
}
