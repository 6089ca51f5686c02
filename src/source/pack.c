/* pack.c — stoke_pack: an image source into packed shards, on every core.
**
** Rewriting a JPEG for restart cuts (jpeg_transcode.c) costs several times
** its decode, so the samples are read, probed and rewritten by producer
** threads, each with its own decoder and reader, while the calling thread
** hands them to the streaming writer (src/storage/pack_writer.c) strictly in index
** order.  The output is therefore the same bytes whatever the thread
** count.  Producers run at most `n_slots` samples ahead of the writer: a
** slot holds one finished sample, so memory stays bounded by a few samples
** per thread whatever the dataset size. */
#define _POSIX_C_SOURCE 200809L /* glob */
#include "source/source.h"

#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "decode/decode.h"
#include "os/syscalls.h"
#include "storage/blob.h"
#include "source/image.h"
#include "transform/transform.h"

/* One finished sample, waiting for the writer. */
typedef struct pack_slot {
  size_t index;             /* the sample held, valid when ready */
  bool ready;
  int rc;                   /* 0 or the producer's STOKE_E* */
  char err[STOKE__ERRMSG_CAP];
  uint8_t *bytes;           /* owned: what goes into the shard */
  size_t n, cap;
  size_t n_in;              /* bytes read */
  stoke_image_info info;
  bool rewritten;           /* a JPEG rewritten */
  bool as_rewritten;        /* a JPEG as the rewrite would make it: kept */
  bool kept;                /* a JPEG the rewrite could not take */
  bool resized;             /* decoded, resized to max_side, re-encoded */
  char kept_why[STOKE__ERRMSG_CAP];
} pack_slot;

/* One producer thread's own tools. */
typedef struct pack_job pack_job;
typedef struct pack_worker {
  pack_job *job;
  stoke__decoder *dec;
  stoke__blob_reader reader;
  stoke__thread *thread;
  stoke__tf_scratch tf;     /* max_side: the resampler's */
  uint8_t *px;              /* max_side: the resized pixels, px_cap bytes */
  size_t px_cap;
} pack_worker;

struct pack_job {
  const stoke_allocator *alloc; /* cfg's: every allocation of the pack */
  const stoke__blobset *set;
  bool rewrite;             /* !keep_bytes */
  unsigned max_side;        /* 0: no resize */
  int quality;
  size_t total;
  pthread_mutex_t mu;
  pthread_cond_t cv;        /* any change below */
  size_t next;              /* next sample to claim */
  size_t consumed;          /* samples the writer has taken */
  bool stop;
  pack_slot *slots;
  size_t n_slots;
};

void stoke_pack_config_init(stoke_pack_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->shard_bytes = 256000000;
  cfg->quality = 90;
}

/* The size an image of w x h takes with its longer side at max_side: the
** other side in proportion, rounded, at least 1. */
static void fit(uint32_t w, uint32_t h, unsigned max_side, uint32_t *tw,
                uint32_t *th) {
  if (w >= h) {
    *tw = max_side;
    *th = (uint32_t)((double)h * max_side / w + 0.5);
  } else {
    *th = max_side;
    *tw = (uint32_t)((double)w * max_side / h + 0.5);
  }
  if (*tw < 1) *tw = 1;
  if (*th < 1) *th = 1;
}

/* Decode the image (at the largest DCT scale that keeps the target size),
** resize it to tw x th with the transforms' antialiased PIL bilinear
** filter, and encode it as a JPEG with restart cuts into slot s. */
static int resize(pack_worker *w, const uint8_t *bytes, size_t n,
                  uint32_t tw, uint32_t th, pack_slot *s) {
  const pack_job *j = w->job;
  stoke__decode_req req = {.out_w = tw, .out_h = th};
  stoke__image img;
  char why[STOKE__ERRMSG_CAP];
  int rc = stoke__decode(w->dec, bytes, n, &req, &img, why, sizeof why);
  if (rc != 0) return stoke__errf(s->err, sizeof s->err, rc, "%s", why);
  stoke__tf_spec spec = {.crop = STOKE__TF_CROP_CENTER, .out_w = (int)tw,
                         .out_h = (int)th, .layout = STOKE__TF_HWC,
                         .dtype = STOKE_U8};
  stoke__tf_plan plan = {.box_w = img.info.width, .box_h = img.info.height,
                         .clip_x1 = (int)img.info.width,
                         .clip_y1 = (int)img.info.height, .out_w = (int)tw,
                         .out_h = (int)th};
  stoke__tf_image tfi = {.px = img.pixels, .w = (int)img.width,
                         .h = (int)img.height, .stride = img.stride,
                         .x0 = img.win_x, .y0 = img.win_y,
                         .scale = img.scale};
  size_t need = (size_t)tw * th * 3;
  if (need > w->px_cap) {
    stoke__free(j->alloc, w->px);
    w->px_cap = 0;
    if (!(w->px = stoke__alloc(j->alloc, need)))
      return stoke__errf(s->err, sizeof s->err, STOKE_ENOMEM,
                         "out of memory for %ux%u pixels", tw, th);
    w->px_cap = need;
  }
  if ((rc = stoke__tf_apply(&spec, &plan, &tfi, &w->tf, w->px)) != 0)
    return stoke__errf(s->err, sizeof s->err, rc, "resize: %s",
                       stoke__tls_error());
  uint8_t *out;
  size_t out_n;
  rc = stoke__jpeg_encode(w->dec, w->px, tw, th, (size_t)tw * 3, j->quality,
                          &out, &out_n, why, sizeof why);
  if (rc != 0) return stoke__errf(s->err, sizeof s->err, rc, "%s", why);
  stoke__free(j->alloc, s->bytes);
  s->bytes = out;
  s->n = s->cap = out_n;
  s->info.format = STOKE_IMAGE_JPEG;
  s->info.width = tw;
  s->info.height = th;
  s->resized = true;
  return 0;
}

static int slot_take(const stoke_allocator *a, pack_slot *s,
                     const uint8_t *bytes, size_t n) {
  if (n > s->cap) {
    stoke__free(a, s->bytes);
    s->cap = 0;
    s->bytes = stoke__alloc(a, n ? n : 1);
    if (!s->bytes) return STOKE_ENOMEM;
    s->cap = n ? n : 1;
  }
  if (n) memcpy(s->bytes, bytes, n);
  s->n = n;
  return 0;
}

/* Read, probe and (for JPEGs) rewrite sample i into slot s.  A JPEG the
** rewrite cannot read is kept as it was (it then decodes, or fails, at
** training time exactly as from the folder); only a broken header or
** running out of memory fails the pack. */
static void produce(pack_worker *w, size_t i, pack_slot *s) {
  const pack_job *j = w->job;
  const uint8_t *bytes;
  size_t n;
  s->rewritten = s->as_rewritten = s->kept = s->resized = false;
  s->rc = stoke__image_probe(j->set, i, &w->reader, w->dec, &bytes, &n,
                             &s->info, s->err, sizeof s->err);
  if (s->rc != 0) return;
  s->n_in = n;
  if (j->max_side &&
      STOKE__MAX(s->info.width, s->info.height) > j->max_side) {
    uint32_t tw, th;
    fit(s->info.width, s->info.height, j->max_side, &tw, &th);
    char why[STOKE__ERRMSG_CAP], where[256];
    if ((s->rc = resize(w, bytes, n, tw, th, s)) != 0) {
      snprintf(why, sizeof why, "%s", s->err);
      stoke__blobset_describe(j->set, i, where, sizeof where);
      snprintf(s->err, sizeof s->err, "pack: sample %zu (%.200s): %.250s",
               i, where, why);
    }
    stoke__blobset_done(j->set, i, bytes, n);
    return;
  }
  bool jpeg = j->rewrite && s->info.format == STOKE_IMAGE_JPEG;
  /* The rewrite's own test, not info.restart_cuts: a JPEG with wider
  ** intervals still cuts, but coarsely, and is rewritten. */
  s->as_rewritten = jpeg && stoke__jpeg_rewrite_done(bytes, n);
  if (jpeg && !s->as_rewritten) {
    uint8_t *out;
    size_t out_n;
    char why[STOKE__ERRMSG_CAP];
    int rc = stoke__jpeg_transcode(w->dec, bytes, n, &out, &out_n, why,
                                   sizeof why);
    if (rc == 0 && out) {
      stoke__free(j->alloc, s->bytes);
      s->bytes = out;
      s->n = s->cap = out_n;
      s->rewritten = true;
    } else if (rc == STOKE_ENOMEM) {
      s->rc = rc;
      snprintf(s->err, sizeof s->err, "pack: sample %zu: %.400s", i, why);
    } else {
      s->kept = true;
      char where[256];
      stoke__blobset_describe(j->set, i, where, sizeof where);
      snprintf(s->kept_why, sizeof s->kept_why, "%.200s: %.300s", where,
               rc != 0 ? why : "CMYK or YCCK, kept for its Adobe marker");
    }
  }
  if (!s->rewritten && s->rc == 0 && slot_take(j->alloc, s, bytes, n) != 0) {
    s->rc = STOKE_ENOMEM;
    snprintf(s->err, sizeof s->err, "pack: sample %zu: out of memory", i);
  }
  /* The bytes are copied or rewritten: a packed source's mapped pages may
  ** leave the resident set, as they do for the loader. */
  stoke__blobset_done(j->set, i, bytes, n);
}

static void *producer_main(void *arg) {
  pack_worker *w = arg;
  pack_job *j = w->job;
  for (;;) {
    pthread_mutex_lock(&j->mu);
    while (!j->stop && j->next < j->total &&
           j->next >= j->consumed + j->n_slots)
      pthread_cond_wait(&j->cv, &j->mu);
    if (j->stop || j->next >= j->total) {
      pthread_mutex_unlock(&j->mu);
      return NULL;
    }
    size_t i = j->next++;
    pthread_mutex_unlock(&j->mu);
    /* The writer has taken sample i - n_slots: the slot is free. */
    pack_slot *s = &j->slots[i % j->n_slots];
    produce(w, i, s);
    pthread_mutex_lock(&j->mu);
    s->index = i;
    s->ready = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
  }
}

/* An ImageFolder's class names go into every shard, so that packed data
** still names its labels. */
static int pack_classes(const stoke_allocator *a, const stoke__blobset *set,
                        stoke__pack_writer *w) {
  size_t nc = stoke__blobset_n_classes(set);
  if (nc == 0) return 0;
  const char **names = stoke__calloc(a, nc, sizeof *names);
  if (!names) return stoke__set_tls_error(STOKE_ENOMEM, "pack: out of memory");
  for (size_t c = 0; c < nc; c++) names[c] = stoke__blobset_class_name(set, c);
  char err[STOKE__ERRMSG_CAP];
  int rc = stoke__pack_writer_set_classes(w, names, nc, err, sizeof err);
  stoke__free(a, names);
  return rc ? stoke__set_tls_error(rc, "%s", err) : 0;
}

/* The writer's side: every sample in index order into w. */
static int consume(pack_job *j, stoke__pack_writer *w,
                   const stoke_pack_config *cfg, stoke_pack_result *res) {
  char err[STOKE__ERRMSG_CAP];
  for (size_t i = 0; i < j->total; i++) {
    pack_slot *s = &j->slots[i % j->n_slots];
    pthread_mutex_lock(&j->mu);
    while (!(s->ready && s->index == i)) pthread_cond_wait(&j->cv, &j->mu);
    pthread_mutex_unlock(&j->mu);
    if (s->rc != 0) return stoke__set_tls_error(s->rc, "%s", s->err);
    res->bytes_in += s->n_in;
    res->n_rewritten += s->rewritten;
    res->n_ready += s->as_rewritten;
    res->n_resized += s->resized;
    if (s->kept && res->n_kept++ == 0)
      snprintf(res->first_kept, sizeof res->first_kept, "%s", s->kept_why);
    int rc = stoke__pack_writer_add(
        w, s->bytes, s->n, stoke__blobset_label(j->set, i), s->info.width,
        s->info.height,
        s->info.format == STOKE_IMAGE_JPEG ? STOKE__BLOB_JPEG
                                           : STOKE__BLOB_PNG,
        err, sizeof err);
    if (rc != 0) return stoke__set_tls_error(rc, "%s", err);
    res->bytes += s->n;
    pthread_mutex_lock(&j->mu);
    s->ready = false;
    j->consumed = i + 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (cfg->progress && cfg->progress(cfg->user, i + 1, j->total, res->bytes))
      return stoke__set_tls_error(STOKE_EINVAL, "pack: stopped after %zu of "
                                  "%zu samples; nothing was kept", i + 1,
                                  j->total);
  }
  return 0;
}

static void free_workers(const stoke_allocator *a, pack_worker *ws,
                         size_t n) {
  for (size_t k = 0; k < n; k++) {
    stoke__decoder_destroy(ws[k].dec);
    stoke__blob_reader_free(&ws[k].reader);
    stoke__tf_scratch_free(&ws[k].tf);
    stoke__free(a, ws[k].px);
  }
  stoke__free(a, ws);
}

/* Whether name is "<prefix>-<digits>.stoke": a name the writer may replace
** or remove. */
static bool shard_name(const char *name, size_t prefix_len) {
  const char *d = name + prefix_len + 1, *e = strrchr(name, '.');
  if (!e || strcmp(e, ".stoke") != 0 || e - d < 5) return false;
  for (; d < e; d++)
    if (*d < '0' || *d > '9') return false;
  return true;
}

/* A pack replaces PREFIX-00000.stoke, -00001, ... and removes an earlier
** pack's further ones (pack_writer.c).  A packed source among them would
** lose the shards the pack does not write again (and have the others
** replaced under its mappings), so that is refused before any work.  The
** files are compared by device and inode, so "out/a" and "./x/../out/a"
** are the same prefix. */
static int check_not_source(const stoke_allocator *a, const stoke__sys *sys,
                            const stoke__blobset *set, const char *prefix) {
  const char *const *paths;
  size_t n = stoke__blobset_files(set, &paths);
  if (n == 0) return 0;
  /* glob(3) pattern: the prefix with its own wildcards escaped. */
  size_t len = strlen(prefix);
  char *pattern = stoke__alloc(a, 2 * len + sizeof "-*.stoke");
  if (!pattern)
    return stoke__set_tls_error(STOKE_ENOMEM, "pack: out of memory");
  char *w = pattern;
  for (const char *c = prefix; *c; c++) {
    if (strchr("*?[\\", *c)) *w++ = '\\';
    *w++ = *c;
  }
  strcpy(w, "-*.stoke");
  glob_t g;
  int grc = glob(pattern, 0, NULL, &g);
  stoke__free(a, pattern);
  if (grc != 0) { /* no match, or the folder cannot be read: nothing to lose */
    globfree(&g);
    return grc == GLOB_NOSPACE
               ? stoke__set_tls_error(STOKE_ENOMEM, "pack: out of memory")
               : 0;
  }
  /* Each source file's identity once, then every candidate against them. */
  struct stat *in = stoke__calloc(a, n, sizeof *in);
  if (!in) {
    globfree(&g);
    return stoke__set_tls_error(STOKE_ENOMEM, "pack: out of memory");
  }
  for (size_t k = 0; k < n; k++)
    if (sys->stat(sys->user, paths[k], &in[k]) != 0)
      in[k].st_nlink = 0; /* gone: no match */
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++) {
    struct stat out;
    if (!shard_name(g.gl_pathv[i], len) ||
        sys->stat(sys->user, g.gl_pathv[i], &out) != 0)
      continue;
    for (size_t k = 0; k < n; k++)
      if (in[k].st_nlink && in[k].st_dev == out.st_dev &&
          in[k].st_ino == out.st_ino) {
        rc = stoke__set_tls_error(
            STOKE_EINVAL,
            "pack: %s is one of the shards being read (%s); a pack "
            "replaces or removes every %s-NNNNN.stoke, so write to "
            "another prefix",
            g.gl_pathv[i], paths[k], prefix);
        break;
      }
  }
  stoke__free(a, in);
  globfree(&g);
  return rc;
}

int stoke_pack(const stoke_source *src, const char *out_prefix,
               const stoke_pack_config *cfg, stoke_pack_result *res) {
  return stoke__pack(src, out_prefix, cfg, NULL, res);
}

int stoke__pack(const stoke_source *src, const char *out_prefix,
                const stoke_pack_config *cfg, const stoke__sys *sys,
                stoke_pack_result *res) {
  sys = stoke__sys_or_real(sys);
  const stoke__blobset *set = stoke__image_blobset(src);
  if (!set || !out_prefix || !*out_prefix)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "pack: needs an image source and an output "
                                "prefix");
  stoke_pack_config def;
  if (!cfg) {
    stoke_pack_config_init(&def);
    cfg = &def;
  }
  if (cfg->struct_size != sizeof *cfg)
    return stoke__set_tls_error(
        STOKE_EINVAL, "pack: struct_size is %zu, expected %zu (call "
                      "stoke_pack_config_init)", cfg->struct_size, sizeof *cfg);
  stoke_pack_result local;
  if (!res) res = &local;
  memset(res, 0, sizeof *res);
  const stoke_allocator *a = cfg->alloc;
  int guard = check_not_source(a, sys, set, out_prefix);
  if (guard != 0) return guard;

  if (cfg->max_side > 65535 || (cfg->max_side && (cfg->quality < 1 ||
                                                  cfg->quality > 100)))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "pack: max_side %u (1..65535) or quality %d "
                                "(1..100) out of range", cfg->max_side,
                                cfg->quality);
  pack_job j = {.alloc = a, .set = set, .rewrite = !cfg->keep_bytes,
                .max_side = cfg->max_side, .quality = cfg->quality,
                .total = stoke__blobset_n_samples(set)};
  size_t n_threads = cfg->n_threads ? cfg->n_threads : stoke__online_cpus();
  n_threads = STOKE__MAX((size_t)1, STOKE__MIN(n_threads, (size_t)64));
  n_threads = STOKE__MIN(n_threads, STOKE__MAX(j.total, (size_t)1));
  j.n_slots = 4 * n_threads;
  j.slots = stoke__calloc(a, j.n_slots, sizeof *j.slots);
  pack_worker *ws = stoke__calloc(a, n_threads, sizeof *ws);
  stoke__pack_writer *w = NULL;
  size_t started = 0;
  char err[STOKE__ERRMSG_CAP];
  int rc = j.slots && ws ? 0 : STOKE_ENOMEM;
  stoke__decoder_opts dopts;
  stoke__decoder_opts_init(&dopts);
  dopts.alloc = a;
  for (size_t k = 0; rc == 0 && k < n_threads; k++) {
    ws[k].job = &j;
    stoke__blob_reader_init(&ws[k].reader, a);
    stoke__tf_scratch_init(&ws[k].tf, a);
    rc = stoke__decoder_create(&dopts, &ws[k].dec);
  }
  if (rc != 0) {
    rc = stoke__set_tls_error(rc, "pack: out of memory");
    goto out;
  }
  /* 0 = one shard, whatever the size (the writer wants a bound). */
  uint64_t shard = cfg->shard_bytes ? cfg->shard_bytes : UINT64_MAX;
  rc = stoke__pack_writer_create(out_prefix, shard, 0, a, sys, &w, err,
                                 sizeof err);
  if (rc != 0) {
    rc = stoke__set_tls_error(rc, "%s", err);
    goto out;
  }
  rc = pack_classes(a, set, w);
  if (rc != 0) goto out;
  if (cfg->max_side &&
      (rc = stoke__pack_writer_set_resize(w, cfg->max_side, cfg->quality,
                                          err, sizeof err)) != 0) {
    rc = stoke__set_tls_error(rc, "%s", err);
    goto out;
  }
  pthread_mutex_init(&j.mu, NULL);
  pthread_cond_init(&j.cv, NULL);
  /* Fewer producers than asked (a thread that cannot start) only make the
  ** pack slower: the shards are the same whatever the count. */
  int start_rc = 0;
  for (; started < n_threads; started++)
    if ((start_rc = stoke__thread_start(&ws[started].thread, a, sys,
                                        "stoke-pack", producer_main,
                                        &ws[started])) != 0)
      break;
  rc = started ? consume(&j, w, cfg, res)
               : stoke__set_tls_error(start_rc, "pack: cannot start a "
                                      "thread: %s", stoke_strerror(start_rc));
  pthread_mutex_lock(&j.mu);
  j.stop = true;
  pthread_cond_broadcast(&j.cv);
  pthread_mutex_unlock(&j.mu);
  for (size_t k = 0; k < started; k++)
    stoke__thread_join(ws[k].thread, a);
  pthread_cond_destroy(&j.cv);
  pthread_mutex_destroy(&j.mu);
  if (rc != 0) goto out;

  size_t n_shards = 0;
  rc = stoke__pack_writer_finish(w, &n_shards, err, sizeof err);
  if (rc != 0) {
    rc = stoke__set_tls_error(rc, "%s", err);
    goto out;
  }
  res->n_samples = j.total;
  res->n_shards = n_shards;
  res->n_stale_removed = stoke__pack_writer_n_stale(w);
  snprintf(res->first_shard, sizeof res->first_shard, "%s",
           n_shards ? stoke__pack_writer_shard_path(w, 0) : "");
out:
  stoke__pack_writer_destroy(w); /* before finish: removes the .tmp files */
  if (ws) free_workers(a, ws, n_threads);
  if (j.slots)
    for (size_t k = 0; k < j.n_slots; k++) stoke__free(a, j.slots[k].bytes);
  stoke__free(a, j.slots);
  return rc;
}
