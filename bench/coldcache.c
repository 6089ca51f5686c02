/* coldcache.c — the block order against the uniform shuffle when the data
** are not in the page cache (a dataset larger than RAM, one epoch after
** another).  bench/coldcache.sh builds and runs it.
**
**   coldcache ORDER EPOCHS WORKERS BATCH TRANSFORM SHARD...
**     ORDER: uniform | block[=BYTES] (window 8 blocks)
**
** Before each epoch every shard is dropped from the page cache
** (posix_fadvise(POSIX_FADV_DONTNEED), after the previous epoch's loader,
** and its mappings, are gone), so each epoch reads its samples from
** storage: the uniform order as random reads, the block order as runs of
** consecutive samples with the next window read ahead.  Each epoch is its
** own loader (set_epoch(e)), so nothing stays mapped between epochs.
**
** What the block order gives up is randomness within a batch: its samples
** come from a few blocks of neighbours.  Per batch, the mean of its
** samples' normalised indices (index / N) is a statistic whose spread over
** the batches is sqrt(1/12/B) for a uniform shuffle; the ratio of the
** measured spread to that is 1 for a uniform order and grows as batches
** are made of neighbours.  Also per batch: how many distinct classes (of
** the labels) it holds, against the uniform order's.
**
** Storage: the reads the disk completed during the epochs and their mean
** size (/proc/diskstats of the shards' disk): on a disk that serves random
** reads as fast as the loader decodes, both orders run at one speed, and
** these say what a slower one (a hard disk, network storage) would see.
**
** Prints one JSON line: samples/s per epoch, their mean, the spread
** ratio, the classes per batch and the disk's reads. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* major, minor */
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stoke.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads completed and sectors read by the disk holding path
** (/proc/diskstats; the machine's other readers count too). */
typedef struct disk_io {
  unsigned long long reads, sectors;
} disk_io;

static disk_io disk_now(const char *path) {
  disk_io d = {0, 0};
  struct stat st;
  if (stat(path, &st) != 0) return d;
  unsigned want_major = major(st.st_dev), want_minor = minor(st.st_dev);
  FILE *f = fopen("/proc/diskstats", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    unsigned mj, mn;
    char name[64];
    unsigned long long r, rm, sec;
    if (sscanf(line, "%u %u %63s %llu %llu %llu", &mj, &mn, name, &r, &rm,
               &sec) == 6 &&
        mj == want_major && mn == want_minor) {
      d.reads = r;
      d.sectors = sec;
    }
  }
  if (f) fclose(f);
  return d;
}

static void drop_cache(char **shards, int n) {
  for (int i = 0; i < n; i++) {
    int fd = open(shards[i], O_RDONLY);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: coldcache ORDER EPOCHS WORKERS BATCH TRANSFORM "
                    "SHARD...\n");
    return 2;
  }
  const char *order = argv[1];
  int epochs = atoi(argv[2]);
  unsigned workers = (unsigned)atoi(argv[3]);
  size_t batch = (size_t)atoi(argv[4]);
  const char *transform = argv[5];
  char **shards = argv + 6;
  int n_shards = argc - 6;
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  ic.transform = transform;
  stoke_source *src;
  if (stoke_source_create_images_list((const char *const *)shards,
                                      (size_t)n_shards, &ic, &src) != 0) {
    fprintf(stderr, "coldcache: %s\n", stoke_errmsg(NULL));
    return 2;
  }
  size_t n = stoke_source_n_samples(src);
  size_t n_classes = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t lab = stoke_source_label(src, i);
    if (lab >= 0 && (size_t)lab + 1 > n_classes) n_classes = (size_t)lab + 1;
  }
  uint8_t *seen = calloc(n_classes ? n_classes : 1, 1);
  double rate_sum = 0, mean_sum = 0, mean_sq = 0, classes_sum = 0;
  unsigned long long io_reads = 0, io_sectors = 0;
  size_t n_batches = 0;
  printf("{\"order\": \"%s\", \"samples\": %zu, \"workers\": %u, "
         "\"batch\": %zu, \"epochs\": [", order, n, workers, batch);
  for (int e = 0; e < epochs; e++) {
    drop_cache(shards, n_shards);
    stoke_config c;
    stoke_config_init(&c);
    c.source = src;
    c.n_workers = workers;
    c.batch_size = batch;
    c.prefetch = 4;
    c.seed = 1;
    c.prefetch_next_epoch = 0;
    if (strncmp(order, "block", 5) == 0) {
      c.shuffle = STOKE_SHUFFLE_BLOCK;
      if (order[5] == '=') c.shuffle_block_bytes = strtoull(order + 6, 0, 10);
    } else {
      c.shuffle = STOKE_SHUFFLE_UNIFORM;
    }
    stoke_loader *l;
    if (stoke_loader_create(&c, &l) != 0) {
      fprintf(stderr, "coldcache: %s\n", stoke_errmsg(NULL));
      return 2;
    }
    stoke_loader_set_epoch(l, (uint64_t)e);
    disk_io io0 = disk_now(shards[0]);
    double t0 = now_s();
    stoke_batch *b;
    size_t got = 0;
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
      const size_t *ix = stoke_batch_indices(b);
      size_t k = stoke_batch_size(b);
      double m = 0;
      memset(seen, 0, n_classes ? n_classes : 1);
      size_t distinct = 0;
      for (size_t i = 0; i < k; i++) {
        m += (double)ix[i] / (double)n;
        int64_t lab = stoke_source_label(src, ix[i]);
        if (lab >= 0 && !seen[lab]) {
          seen[lab] = 1;
          distinct++;
        }
      }
      if (k == batch) { /* the full batches only: one spread */
        m /= (double)k;
        mean_sum += m;
        mean_sq += m * m;
        classes_sum += (double)distinct;
        n_batches++;
      }
      got += k;
      stoke_batch_release(b);
    }
    double secs = now_s() - t0;
    disk_io io1 = disk_now(shards[0]);
    io_reads += io1.reads - io0.reads;
    io_sectors += io1.sectors - io0.sectors;
    if (rc != STOKE_END) {
      fprintf(stderr, "coldcache: %s\n", stoke_errmsg(l));
      return 2;
    }
    stoke_loader_destroy(l);
    double rate = (double)got / secs;
    rate_sum += rate;
    printf("%s%.1f", e ? ", " : "", rate);
    fflush(stdout);
  }
  double mu = mean_sum / (double)n_batches;
  double sd = sqrt(fmax(0, mean_sq / (double)n_batches - mu * mu));
  double iid = sqrt(1.0 / 12.0 / (double)batch);
  printf("], \"samples_per_s\": %.1f, \"batch_mean_spread\": %.4f, "
         "\"uniform_spread\": %.4f, \"spread_ratio\": %.2f, "
         "\"classes_per_batch\": %.2f, \"classes\": %zu, "
         "\"disk_reads_per_epoch\": %.0f, \"disk_mb_per_epoch\": %.1f, "
         "\"disk_kb_per_read\": %.1f}\n",
         rate_sum / epochs, sd, iid, sd / iid, classes_sum / (double)n_batches,
         n_classes, (double)io_reads / epochs,
         (double)io_sectors * 512 / 1e6 / epochs,
         io_reads ? (double)io_sectors * 512 / 1024 / (double)io_reads : 0);
  free(seen);
  stoke_source_destroy(src);
  return 0;
}
