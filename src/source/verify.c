/* verify.c — stoke_verify: decode every sample of an image source once.
**
** The loader decodes only the window a crop needs, and a packed shard's
** CRCs are not checked on its hot path, so a damaged file can hide until
** the epoch that crops its damaged part.  Verification reads every sample,
** checks its CRC (packed shards: through a second, CRC-checking view of
** the same shards) and decodes it whole at full scale, on n_threads
** threads that claim samples from a shared counter, each with its own
** decoder and read buffer.  Bad samples go to the quarantine file (in
** REWRITE mode: the file appears complete or not at all) and the first
** ones into the result; the calling thread reports progress.
**
** File calls and threads use the real system calls (the NULL table of
** os/syscalls.h), not the source's: it does not say which it has.
**
** Threads: the caller's (progress, joining) and n_threads workers.  Lock:
** job.mu (a leaf) guards the counters and the result; the quarantine has
** its own.  No lock is held across a read or a decode. */
#define _POSIX_C_SOURCE 200809L
#include "source/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decode/decode.h"
#include "storage/blob.h"
#include "storage/http.h"
#include "storage/s3.h"
#include "storage/url.h"
#include "source/image.h"

typedef struct verify_job {
  const stoke_source *src;
  const stoke__blobset *set;    /* what the workers read */
  stoke__quarantine *quarantine;
  size_t total;
  pthread_mutex_t mu;
  pthread_cond_t cv;            /* a sample done (for progress) */
  size_t next;                  /* next sample to claim; mu */
  size_t done;                  /* mu */
  bool stop;                    /* mu */
  int fatal;                    /* a worker could not start: mu */
  stoke_verify_result *res;     /* n_bad, bytes, bad[]: mu */
} verify_job;

typedef struct verify_worker {
  verify_job *job;
  stoke__thread *thread;
} verify_worker;

void stoke_verify_config_init(stoke_verify_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
}

static void *verify_main(void *arg) {
  verify_worker *w = arg;
  verify_job *j = w->job;
  stoke__decoder *dec = NULL;
  stoke__blob_reader reader;
  stoke__blob_reader_init(&reader, NULL);
  if (stoke__image_verify_decoder(j->src, &dec) != 0) {
    pthread_mutex_lock(&j->mu);
    j->fatal = STOKE_ENOMEM;
    j->stop = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
  }
  char err[STOKE__ERRMSG_CAP];
  for (;;) {
    pthread_mutex_lock(&j->mu);
    if (j->stop || j->next >= j->total) {
      pthread_mutex_unlock(&j->mu);
      break;
    }
    size_t i = j->next++;
    pthread_mutex_unlock(&j->mu);
    uint64_t bytes = 0;
    err[0] = '\0';
    int rc = stoke__image_verify(j->set, i, &reader, dec, &bytes, err,
                                 sizeof err);
    stoke_failure f;
    if (rc != 0) {
      memset(&f, 0, sizeof f);
      f.index = i;
      f.action = STOKE_ON_ERROR_FAIL;
      f.substitute = SIZE_MAX;
      stoke__blobset_describe(j->set, i, f.where, sizeof f.where);
      snprintf(f.reason, sizeof f.reason, "%s",
               err[0] ? err : stoke_strerror(rc));
      stoke__quarantine_add(j->quarantine, i, f.where, f.reason, NULL, 0);
    }
    pthread_mutex_lock(&j->mu);
    stoke_verify_result *r = j->res;
    r->bytes += bytes;
    if (rc != 0) {
      if (r->n_listed < sizeof r->bad / sizeof r->bad[0])
        r->bad[r->n_listed++] = f;
      r->n_bad++;
    }
    j->done++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
  }
  stoke__blob_reader_free(&reader);
  stoke__decoder_destroy(dec);
  return NULL;
}

static int by_index(const void *a, const void *b) {
  size_t x = ((const stoke_failure *)a)->index,
         y = ((const stoke_failure *)b)->index;
  return x < y ? -1 : x > y;
}

int stoke_verify(const stoke_source *src, const stoke_verify_config *cfg,
                 stoke_verify_result *res) {
  stoke_verify_config def;
  if (!cfg) {
    stoke_verify_config_init(&def);
    cfg = &def;
  }
  if (!src || !res)
    return stoke__set_tls_error(STOKE_EINVAL, "verify: NULL argument");
  if (cfg->struct_size != sizeof *cfg)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "verify: struct_size is %zu, expected %zu "
                                "(call stoke_verify_config_init)",
                                cfg->struct_size, sizeof *cfg);
  memset(res, 0, sizeof *res);
  const stoke__blobset *set = stoke__image_blobset(src);
  if (!set)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "verify: a %s source has no files to check; "
                                "only image sources can be verified",
                                src->kind);
  char err[STOKE__ERRMSG_CAP];
  /* Packed shards: a view of the same files that checks each CRC. */
  stoke__blobset *crc_set = NULL;
  if (strcmp(stoke__blobset_kind(set), "packed") == 0) {
    const char *const *paths;
    size_t n = stoke__blobset_files(set, &paths);
    /* Shards in S3 are reopened with the environment's S3 settings (read
    ** again here: this is an open of its own); other URLs need none. */
    stoke__s3_conf *s3 = NULL;
    int rc = 0;
    if (n && stoke__url_is_s3(paths[0]))
      rc = stoke__s3_conf_new(NULL, &s3, err, sizeof err);
    stoke__http_options remote = {.s3 = s3};
    if (rc == 0)
      /* The set's files are paths already: a '{' in one is its name. */
      rc = stoke__blobset_open_packed_ex(
          paths, n, STOKE__PACK_VERIFY_CRC | STOKE__BLOB_LITERAL, &remote,
          NULL, NULL, &crc_set, err, sizeof err);
    stoke__s3_conf_free(NULL, s3); /* the secret: not left */
    if (rc != 0) return stoke__set_tls_error(rc, "verify: %s", err);
    set = crc_set;
  }
  verify_job j;
  memset(&j, 0, sizeof j);
  j.src = src;
  j.set = set;
  j.total = src->n_samples;
  j.res = res;
  int rc = 0;
  if (cfg->quarantine_path) {
    rc = stoke__quarantine_open(cfg->quarantine_path, src,
                                stoke_source_fingerprint(src),
                                STOKE__QUARANTINE_REWRITE, NULL, &j.quarantine,
                                err, sizeof err);
    if (rc != 0) {
      stoke__blobset_close(crc_set);
      return stoke__set_tls_error(rc, "verify: %s", err);
    }
  }
  unsigned nt = cfg->n_threads ? cfg->n_threads : stoke__online_cpus();
  if (nt > j.total) nt = (unsigned)j.total;
  if (nt == 0) nt = 1;
  verify_worker *w = stoke__calloc(NULL, nt, sizeof *w);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&j.mu, NULL);
  pthread_cond_init(&j.cv, &ca);
  pthread_condattr_destroy(&ca);
  unsigned started = 0;
  if (!w) rc = STOKE_ENOMEM;
  for (; rc == 0 && started < nt; started++) {
    char name[24];
    snprintf(name, sizeof name, "stoke-v%u", started % 100000u);
    w[started].job = &j;
    rc = stoke__thread_start(&w[started].thread, NULL, NULL, name,
                             verify_main, &w[started]);
    if (rc != 0) break;
  }
  /* Progress from this thread, at most every 100 ms and at the end. */
  pthread_mutex_lock(&j.mu);
  if (rc != 0) j.stop = true;
  size_t shown = (size_t)-1;
  while (started > 0 && j.done < j.total && !j.stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&j.cv, &j.mu, &ts);
    if (cfg->progress && j.done != shown) {
      size_t done = j.done, bad = res->n_bad;
      shown = done;
      pthread_mutex_unlock(&j.mu);
      int stop = cfg->progress(cfg->user, done, j.total, bad);
      pthread_mutex_lock(&j.mu);
      if (stop) {
        j.stop = true;
        res->stopped = 1;
      }
    }
  }
  pthread_mutex_unlock(&j.mu);
  for (unsigned i = 0; i < started; i++)
    stoke__thread_join(w[i].thread, NULL);
  if (rc == 0 && j.fatal) rc = j.fatal;
  res->n_samples = j.done;
  /* A stop asked for while the last samples finished anyway is no stop:
  ** the result is complete. */
  if (j.done == j.total) res->stopped = 0;
  if (rc == 0 && cfg->progress && !res->stopped && shown != j.done)
    cfg->progress(cfg->user, j.done, j.total, res->n_bad);
  qsort(res->bad, res->n_listed, sizeof res->bad[0], by_index);
  char qerr[256] = "";
  if (rc == 0 && stoke__quarantine_error(j.quarantine, qerr, sizeof qerr))
    rc = stoke__set_tls_error(STOKE_EIO, "verify: %s", qerr);
  else if (rc == STOKE_ETHREAD)
    stoke__set_tls_error(rc, "verify: cannot start thread %u of %u", started,
                         nt);
  else if (rc != 0)
    stoke__set_tls_error(rc, "verify: out of memory");
  /* REWRITE: renamed into place only when every sample was checked. */
  if (rc != 0 || res->stopped) stoke__quarantine_discard(j.quarantine);
  stoke__quarantine_close(j.quarantine);
  pthread_mutex_destroy(&j.mu);
  pthread_cond_destroy(&j.cv);
  stoke__free(NULL, w);
  stoke__blobset_close(crc_set);
  return rc;
}
