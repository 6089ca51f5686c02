/* image.c — image datasets as sources: storage (src/storage/: ImageFolder
** directory, tar shards or packed shards) + decode (src/decode/) +
** transform (src/transform/), fused per sample:
**
**   read     the encoded bytes (pread into the worker's buffer, or a
**            pointer into the mmap of a packed shard)
**   decode   probe the header, plan the crop from the sample's random
**            stream, decode only the window the resampler will read, at the
**            largest DCT scale (1/2, 1/4, 1/8) that loses no output detail
**   transform resample the exact crop box out of that window, flip,
**            normalize, write straight into the batch slot
**
** Each worker owns a decoder context, a read buffer and resampler scratch
** (scratch_create), so no state is shared between workers and a sample is
** the same whatever worker made it. */
#define _POSIX_C_SOURCE 200809L
#include "source/source.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "decode/decode.h"
#include "transform/u8_form.h"
#include "os/syscalls.h"
#include "storage/blob.h"
#include "storage/cache.h"
#include "storage/http.h"
#include "storage/s3.h"
#include "storage/url.h"
#include "source/image.h"
#include "source/scratch.h"
#include "transform/transform.h"

typedef struct image_impl {
  const stoke_allocator *alloc; /* borrowed from cfg: the source's memory */
  stoke__blobset *set;   /* owned */
  stoke__tf_spec spec;
  stoke__tf_spec spec_u8; /* the same to u8 pixels, for the device to
                             normalise (stoke_sample.u8_form) */
  stoke_image_config cfg;
  char *transform_text;  /* owned copy of cfg.transform */
  stoke__scratch_bound scratch; /* the largest image, for the ledger */
  bool remote_cached;    /* remote shards read through cfg.cache_dir
                            (storage/rcache.h): the packing cache has
                            nothing to do */
} image_impl;

typedef struct image_scratch {
  stoke__decoder *dec;
  stoke__blob_reader reader;
  stoke__tf_scratch tf;
} image_scratch;

#define DEFAULT_TRANSFORM "random-resized-crop=224,flip,chw,u8"

void stoke_image_config_init(stoke_image_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->kind = STOKE_IMAGES_AUTO;
  cfg->transform = DEFAULT_TRANSFORM;
  cfg->max_pixels = STOKE__DECODE_DEFAULT_MAX_PIXELS;
  cfg->max_bytes = 256u << 20;
}

/* The encoded bytes of the sample: from the packed cache when it holds
** them (or offered to it once read), else from the storage. */
static int read_bytes(const image_impl *im, stoke_sample *s,
                      image_scratch *sc, const uint8_t **bytes, size_t *n,
                      char *err, size_t cap) {
  if (s->cache)
    return stoke__cache_read(s->cache, im->set, s->index, &sc->reader,
                             sc->dec, bytes, n, err, cap);
  return stoke__blobset_read(im->set, s->index, &sc->reader, bytes, n, err,
                             cap);
}

static void done_bytes(const image_impl *im, stoke_sample *s,
                       const uint8_t *bytes, size_t n) {
  if (s->cache)
    stoke__cache_done(s->cache, im->set, s->index, bytes, n);
  else
    stoke__blobset_done(im->set, s->index, bytes, n);
}

/* Copies planned with the same DCT scale decode together: the union of
** their windows, once (most copies of a photo share the scale). */
typedef struct copy_plan {
  stoke__tf_plan plan;
  int denom, win[4];
  bool done;
} copy_plan;

static int image_fill_copies(stoke_source *src, stoke_sample *s) {
  const image_impl *im = src->impl;
  const stoke__tf_spec *spec = s->u8_form ? &im->spec_u8 : &im->spec;
  image_scratch *sc = s->scratch;
  char err[STOKE__ERRMSG_CAP];
  const uint8_t *bytes;
  size_t n;
  if (read_bytes(im, s, sc, &bytes, &n, err, sizeof err) != 0)
    return stoke_sample_fail(s, "%s", err);

  stoke_sample_stage(s, STOKE_STAGE_DECODE);
  stoke__img_info info;
  if (!stoke__decode_peek(bytes, n, &info) &&
      stoke__decode_probe(sc->dec, bytes, n, &info, err, sizeof err) != 0) {
    done_bytes(im, s, bytes, n);
    return stoke_sample_fail(s, "%s", err);
  }
  s->src_w = info.width;
  s->src_h = info.height;
  unsigned copies = s->copies > 1 ? s->copies : 1;
  copy_plan cp_stack[8], *cp = cp_stack;
  if (copies > 8) {
    cp = stoke__calloc(sc->tf.alloc, copies, sizeof *cp);
    if (!cp) {
      done_bytes(im, s, bytes, n);
      return stoke_sample_fail(s, "out of memory planning %u copies",
                               copies);
    }
  }
  int rc = 0;
  stoke_rng base = *stoke__sample_rng(s);
  for (unsigned j = 0; j < copies && rc == 0; j++) {
    stoke_rng r;
    stoke__copy_rng(&base, j, &r);
    if (stoke__tf_plan_make(spec, (int)info.width, (int)info.height, &r,
                            &cp[j].plan) != 0) {
      rc = stoke_sample_fail(s, "%s", stoke__tls_error());
      break;
    }
    if (j == 0) s->rng = r; /* the sample's stream, as a single fill's */
    /* Decode only what the resampler reads, at the scale that keeps every
    ** output pixel's detail; out_w/out_h force exactly that scale. */
    cp[j].denom = stoke__tf_plan_dct_denom(&cp[j].plan);
    stoke__tf_plan_window(&cp[j].plan, cp[j].denom, cp[j].win);
    if (cp[j].win[2] > (int)info.width) cp[j].win[2] = (int)info.width;
    if (cp[j].win[3] > (int)info.height) cp[j].win[3] = (int)info.height;
    cp[j].done = false;
  }
  for (unsigned j = 0; j < copies && rc == 0; j++) {
    if (cp[j].done) continue;
    int denom = cp[j].denom, win[4];
    memcpy(win, cp[j].win, sizeof win);
    for (unsigned k = j + 1; k < copies; k++)
      if (!cp[k].done && cp[k].denom == denom) {
        win[0] = STOKE__MIN(win[0], cp[k].win[0]);
        win[1] = STOKE__MIN(win[1], cp[k].win[1]);
        win[2] = STOKE__MAX(win[2], cp[k].win[2]);
        win[3] = STOKE__MAX(win[3], cp[k].win[3]);
      }
    stoke__decode_req req = {
        .x = (uint32_t)win[0], .y = (uint32_t)win[1],
        .w = (uint32_t)(win[2] - win[0]), .h = (uint32_t)(win[3] - win[1])};
    req.out_w = (req.w + (uint32_t)denom - 1) / (uint32_t)denom;
    req.out_h = (req.h + (uint32_t)denom - 1) / (uint32_t)denom;
    stoke__image img;
    stoke_sample_stage(s, STOKE_STAGE_DECODE);
    if (stoke__decode(sc->dec, bytes, n, &req, &img, err, sizeof err) != 0) {
      rc = stoke_sample_fail(s, "%s", err);
      break;
    }
    stoke_sample_stage(s, STOKE_STAGE_TRANSFORM);
    stoke__tf_image tfi = {.px = img.pixels, .w = (int)img.width,
                           .h = (int)img.height, .stride = img.stride,
                           .x0 = img.win_x, .y0 = img.win_y,
                           .scale = img.scale};
    for (unsigned k = j; k < copies && rc == 0; k++) {
      if (cp[k].done || cp[k].denom != denom) continue;
      cp[k].done = true;
      void *dst = (char *)s->dst[0] + k * s->copy_step[0];
      if (stoke__tf_apply(spec, &cp[k].plan, &tfi, &sc->tf, dst) != 0)
        rc = stoke_sample_fail(s, "transform: %s", stoke__tls_error());
    }
  }
  done_bytes(im, s, bytes, n);
  if (cp != cp_stack) stoke__free(sc->tf.alloc, cp);
  if (rc != 0) return rc;
  int64_t label = stoke__blobset_label(im->set, s->index);
  for (unsigned j = 0; j < copies; j++)
    memcpy((char *)s->dst[1] + j * s->copy_step[1], &label, sizeof label);
  return 0;
}

static int image_fill(stoke_source *src, stoke_sample *s) {
  unsigned copies = s->copies;
  s->copies = 1; /* the same path, one copy */
  int rc = image_fill_copies(src, s);
  s->copies = copies;
  return rc;
}

/* resize + center-crop without flip: the same bytes every epoch. */
static bool image_deterministic(const stoke_source *src) {
  const image_impl *im = src->impl;
  return im->spec.crop == STOKE__TF_CROP_CENTER && im->spec.flip_p == 0;
}

static uint64_t image_stored_bytes(const stoke_source *src, size_t i) {
  const image_impl *im = src->impl;
  return stoke__blobset_stored_bytes(im->set, i);
}

static uint64_t image_held_bytes(const stoke_source *src) {
  const image_impl *im = src->impl;
  return stoke__blobset_held_bytes(im->set);
}

static const struct stoke__http *image_http(const stoke_source *src) {
  const image_impl *im = src->impl;
  return stoke__blobset_http(im->set);
}

static bool image_rcache_counts(const stoke_source *src,
                                struct stoke__rcache_counts *out) {
  const image_impl *im = src->impl;
  return stoke__blobset_rcache_counts(im->set, out);
}

static void image_read_ahead(const stoke_source *src, size_t first,
                             size_t n) {
  const image_impl *im = src->impl;
  stoke__blobset_read_ahead(im->set, first, n);
}

static void image_destroy(stoke_source *src) {
  image_impl *im = src->impl;
  if (!im) return;
  stoke__blobset_close(im->set);
  stoke__free(im->alloc, im->transform_text);
  stoke__free(im->alloc, im);
}

static void image_describe(const stoke_source *src, size_t index, char *buf,
                           size_t cap) {
  const image_impl *im = src->impl;
  stoke__blobset_describe(im->set, index, buf, cap);
}

static int image_scratch_create(stoke_source *src, const stoke_allocator *a,
                                void **out) {
  const image_impl *im = src->impl;
  image_scratch *sc = stoke__calloc(a, 1, sizeof *sc);
  if (!sc) return STOKE_ENOMEM;
  stoke__decoder_opts o;
  stoke__decoder_opts_init(&o);
  o.max_pixels = im->cfg.max_pixels;
  o.max_bytes = (size_t)im->cfg.max_bytes;
  o.alloc = a;
  int rc = stoke__decoder_create(&o, &sc->dec);
  if (rc != 0) {
    stoke__free(a, sc);
    return rc;
  }
  stoke__blob_reader_init(&sc->reader, a);
  stoke__tf_scratch_init(&sc->tf, a);
  *out = sc;
  return 0;
}

static void image_scratch_destroy(stoke_source *src, const stoke_allocator *a,
                                  void *p) {
  (void)src;
  image_scratch *sc = p;
  stoke__decoder_destroy(sc->dec);
  stoke__blob_reader_free(&sc->reader);
  stoke__tf_scratch_free(&sc->tf);
  stoke__free(a, sc);
}

static const stoke__source_ops image_ops;

/* A float image can be written as its u8 pixels instead, in the same
** layout, for the device to normalise with the host path's table. */
bool stoke__source_u8_form(const stoke_source *src, stoke__u8_form *out) {
  if (!src || src->ops != &image_ops) return false;
  const image_impl *im = src->impl;
  if (im->spec.dtype != STOKE_F32 && im->spec.dtype != STOKE_F16)
    return false;
  memset(out, 0, sizeof *out);
  out->field = 0;
  out->u8_bytes = stoke__tf_out_bytes(&im->spec_u8);
  out->hwc = im->spec.layout == STOKE__TF_HWC;
  out->plane = (uint32_t)im->spec.out_h * (uint32_t)im->spec.out_w;
  out->dtype = im->spec.dtype;
  stoke__tf_norm_table(&im->spec, out->lut.f32, out->lut.f16);
  return true;
}

static size_t image_n_classes(const stoke_source *src) {
  const image_impl *im = src->impl;
  return stoke__blobset_n_classes(im->set);
}

static const char *image_class_name(const stoke_source *src, size_t c) {
  const image_impl *im = src->impl;
  return stoke__blobset_class_name(im->set, c);
}

static int64_t image_label(const stoke_source *src, size_t index) {
  const image_impl *im = src->impl;
  return stoke__blobset_label(im->set, index);
}

static uint64_t image_scratch_bound(const stoke_source *src, int *basis,
                                    uint32_t *w, uint32_t *h) {
  const image_impl *im = src->impl;
  *basis = im->scratch.basis;
  *w = im->scratch.width;
  *h = im->scratch.height;
  return sizeof(image_scratch) +
         stoke__scratch_bound_bytes(&im->scratch, (uint32_t)im->spec.out_w);
}

static const stoke__source_ops image_ops = {
    .fill = image_fill,
    .destroy = image_destroy,
    .describe = image_describe,
    .scratch_create = image_scratch_create,
    .scratch_destroy = image_scratch_destroy,
    .fill_copies = image_fill_copies,
    .deterministic = image_deterministic,
    .stored_bytes = image_stored_bytes,
    .read_ahead = image_read_ahead,
    .scratch_bound = image_scratch_bound,
    .held_bytes = image_held_bytes,
    .n_classes = image_n_classes,
    .class_name = image_class_name,
    .label = image_label,
    .http = image_http,
    .rcache_counts = image_rcache_counts};

/* The remote client's options from the config (and the S3 settings). */
static void image_remote_options(const stoke_image_config *cfg,
                                 const stoke__s3_conf *s3,
                                 stoke__http_options *o) {
  *o = (stoke__http_options){.ca_path = cfg->tls_ca_path,
                             .insecure = cfg->tls_insecure != 0,
                             .io_concurrency = cfg->io_concurrency,
                             .connect_timeout_ms = cfg->connect_timeout_ms,
                             .stall_timeout_ms = cfg->stall_timeout_ms,
                             .max_attempts = cfg->max_attempts,
                             .retry_budget = cfg->retry_budget,
                             .backoff_ms = cfg->retry_backoff_ms,
                             .s3 = s3,
                             .cache_dir = cfg->cache_dir,
                             .cache_max_bytes = cfg->cache_max_bytes};
}

/* AUTO: a directory is an ImageFolder; a path or pattern ending in .tar is
** a set of tar shards, one ending in .stoke a set of packed shards.  0 for
** none of those, with the stat's errno in *stat_errno (0: it worked). */
static int detect_kind(const stoke__sys *sys, const char *path,
                       int *stat_errno) {
  struct stat st;
  *stat_errno = 0;
  if (sys->stat(sys->user, path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return STOKE_IMAGES_FOLDER;
  } else {
    *stat_errno = errno;
  }
  /* A URL's query (a presigned URL's signature) is not its name. */
  char name[1024];
  snprintf(name, sizeof name, "%s", path);
  if (stoke__url_is_remote(name)) name[strcspn(name, "?#")] = 0;
  if (stoke__ends_with(name, ".tar") || stoke__ends_with(name, ".tar}"))
    return STOKE_IMAGES_TAR;
  if (stoke__ends_with(name, ".stoke") || stoke__ends_with(name, ".stoke}"))
    return STOKE_IMAGES_PACKED;
  return 0;
}

int stoke_source_create_images(const char *path, const stoke_image_config *cfg,
                               stoke_source **out) {
  return stoke__source_create_images(path, cfg, NULL, out);
}

int stoke__source_create_images(const char *path,
                                const stoke_image_config *cfg,
                                const stoke__sys *sys, stoke_source **out) {
  const char *paths[1] = {path};
  return stoke__source_create_images_list(paths, path ? 1 : 0, cfg, sys,
                                          out);
}

int stoke_source_create_images_list(const char *const *paths, size_t n_paths,
                                    const stoke_image_config *cfg,
                                    stoke_source **out) {
  return stoke__source_create_images_list(paths, n_paths, cfg, NULL, out);
}

/* Each s3:// prefix among specs (after their braces) replaced by the
** shards listed under it (s3.h), into *out (one allocation, freed with
** stoke__free): then every spec names shards, and the kind is told from
** their names as for any other list. */
static int list_s3_prefixes(const char *const *specs, size_t n_specs,
                            const stoke__http_options *o,
                            const stoke_allocator *a, char ***out,
                            size_t *n_out, char *err, size_t cap) {
  char **expanded = NULL;
  size_t n_expanded = 0;
  stoke__http *h = NULL;
  stoke__blob_strs all = {0};
  int rc = stoke__blob_expand(specs, n_specs, a, &expanded, &n_expanded, err,
                              cap);
  if (rc == 0) rc = stoke__http_create(o, a, &h, err, cap);
  for (size_t k = 0; k < n_expanded && rc == 0; k++) {
    if (!stoke__url_is_s3(expanded[k]) || !stoke__s3_is_prefix(expanded[k])) {
      if (stoke__blob_strs_add(&all, a, expanded[k], NULL))
        rc = stoke__errf(err, cap, STOKE_ENOMEM, "out of memory");
      continue;
    }
    char **keys;
    size_t n_keys;
    int kind;
    rc = stoke__s3_list(h, expanded[k], a, &keys, &n_keys, &kind, err, cap);
    for (size_t j = 0; j < n_keys && rc == 0; j++)
      if (stoke__blob_strs_add(&all, a, keys[j], NULL))
        rc = stoke__errf(err, cap, STOKE_ENOMEM, "out of memory");
    stoke__free(a, keys); /* NULL when the listing failed */
  }
  stoke__http_destroy(h);
  stoke__free(a, expanded);
  if (rc == 0) rc = stoke__blob_strs_hand_out(&all, a, out, n_out, err, cap);
  stoke__blob_strs_free(&all, a);
  return rc;
}

/* path_flags: STOKE__BLOB_LITERAL when paths are listed keys, not
** patterns. */
static int create_images_list(const char *const *paths, size_t n_paths,
                              const stoke_image_config *cfg,
                              const stoke__sys *sys,
                              const stoke__s3_conf *s3, unsigned path_flags,
                              stoke_source **out);

int stoke__source_create_images_list(const char *const *paths,
                                     size_t n_paths,
                                     const stoke_image_config *cfg,
                                     const stoke__sys *sys,
                                     stoke_source **out) {
  bool any_s3 = false, any_prefix = false;
  for (size_t k = 0; paths && k < n_paths; k++)
    if (stoke__url_is_s3(paths[k])) {
      any_s3 = true;
      any_prefix = any_prefix || stoke__s3_is_prefix(paths[k]);
    }
  stoke_image_config def;
  if (!cfg && any_s3) { /* stoke pack's NULL: the defaults, and S3 */
    stoke_image_config_init(&def);
    cfg = &def;
  }
  if (!any_s3 || !out || cfg->struct_size != sizeof *cfg)
    return create_images_list(paths, n_paths, cfg, sys, NULL, 0, out);
  /* The S3 settings: read once, here, for this source's every request. */
  const stoke_allocator *a = cfg->alloc;
  stoke__s3_conf *s3;
  char err[STOKE__ERRMSG_CAP];
  int rc = stoke__s3_conf_new(a, &s3, err, sizeof err);
  if (rc) return stoke__set_tls_error(rc, "images: %s", err);
  char **listed = NULL;
  size_t n_listed = 0;
  if (any_prefix) {
    stoke__http_options o;
    image_remote_options(cfg, s3, &o);
    rc = list_s3_prefixes(paths, n_paths, &o, a, &listed, &n_listed, err,
                          sizeof err);
    if (rc) stoke__set_tls_error(rc, "images: %s", err);
  }
  if (rc == 0)
    /* The list is expanded already: a listed key's '{' is its own. */
    rc = any_prefix ? create_images_list((const char *const *)listed,
                                         n_listed, cfg, sys, s3,
                                         STOKE__BLOB_LITERAL, out)
                    : create_images_list(paths, n_paths, cfg, sys, s3, 0,
                                         out);
  stoke__free(a, listed);
  stoke__s3_conf_free(a, s3); /* the secret: not left behind */
  return rc;
}

static int create_images_list(const char *const *paths, size_t n_paths,
                              const stoke_image_config *cfg,
                              const stoke__sys *sys,
                              const stoke__s3_conf *s3, unsigned path_flags,
                              stoke_source **out) {
  if (!out) return stoke__set_tls_error(STOKE_EINVAL, "images: out is NULL");
  *out = NULL;
  stoke_image_config def;
  if (!cfg) {
    stoke_image_config_init(&def);
    cfg = &def;
  }
  if (cfg->struct_size != sizeof *cfg)
    return stoke__set_tls_error(
        STOKE_EINVAL, "images: struct_size is %zu, expected %zu (call "
                      "stoke_image_config_init)", cfg->struct_size, sizeof *cfg);
  if (!paths || n_paths == 0 || !paths[0] || !*paths[0])
    return stoke__set_tls_error(STOKE_EINVAL, "images: no path given");
  sys = stoke__sys_or_real(sys);
  const stoke_allocator *a = cfg->alloc;
  const char *path = paths[0];
  /* Messages name a URL by its shown form, never its user-info or query. */
  char shown[1024], shown_k[1024];
  stoke__url_redact(path, shown, sizeof shown);
  int stat_errno = 0;
  int kind = cfg->kind ? cfg->kind : detect_kind(sys, path, &stat_errno);
  /* A path that exists but cannot be looked at (EIO, EACCES) is an error
  ** whatever its name says; only a pattern may name no file. */
  if (stat_errno && stat_errno != ENOENT)
    return stoke__set_tls_error(STOKE_EIO, "images: %s: stat: %s", shown,
                                strerror(stat_errno));
  if (kind == 0 && stat_errno)
    return stoke__set_tls_error(STOKE_EINVAL, "images: %s: %s", shown,
                                strerror(stat_errno));
  if (kind < STOKE_IMAGES_FOLDER || kind > STOKE_IMAGES_PACKED)
    return stoke__set_tls_error(
        STOKE_EINVAL,
        "images: cannot tell what %s is: expected a directory (ImageFolder), "
        "tar shards (*.tar, a {a..b} pattern or a glob) or packed shards "
        "(*.stoke)", shown);
  for (size_t k = 1; k < n_paths; k++) {
    int kk_errno;
    int kk = cfg->kind ? cfg->kind
                       : detect_kind(sys, paths[k] ? paths[k] : "", &kk_errno);
    stoke__url_redact(paths[k] ? paths[k] : "(null)", shown_k,
                      sizeof shown_k);
    if (kind == STOKE_IMAGES_FOLDER || kk != kind)
      return stoke__set_tls_error(
          STOKE_EINVAL,
          "images: %s and %s are not shards of one kind (a list takes tar "
          "or packed shards; an ImageFolder is one directory)",
          shown, shown_k);
  }

  image_impl *im = stoke__calloc(a, 1, sizeof *im);
  if (!im) return stoke__set_tls_error(STOKE_ENOMEM, "images: out of memory");
  im->alloc = a;
  im->cfg = *cfg;
  im->cfg.cache_dir = NULL; /* read at open only, never kept */
  const char *text = cfg->transform ? cfg->transform : DEFAULT_TRANSFORM;
  int rc = stoke__tf_parse(text, &im->spec);
  im->spec_u8 = im->spec;
  im->spec_u8.dtype = STOKE_U8;
  im->spec_u8.normalize = false;
  if (rc == 0) {
    im->transform_text = stoke__strdup(a, text);
    if (!im->transform_text)
      rc = stoke__set_tls_error(STOKE_ENOMEM, "images: out of memory");
    im->cfg.transform = im->transform_text;
  }
  char err[STOKE__ERRMSG_CAP];
  stoke__http_options remote;
  image_remote_options(cfg, s3, &remote);
  if (rc == 0) {
    if (kind == STOKE_IMAGES_FOLDER)
      rc = stoke__blobset_open_folder(path, a, sys, &im->set, err,
                                      sizeof err);
    else if (kind == STOKE_IMAGES_TAR)
      rc = stoke__blobset_open_tar_ex(paths, n_paths, path_flags, &remote,
                                      a, sys,
                                      &im->set, err, sizeof err);
    else
      rc = stoke__blobset_open_packed_ex(
          paths, n_paths,
          path_flags | (cfg->verify_checksums ? STOKE__PACK_VERIFY_CRC : 0),
          &remote, a, sys, &im->set, err, sizeof err);
    for (size_t k = 0; cfg->cache_dir && kind != STOKE_IMAGES_FOLDER &&
                       k < n_paths && !im->remote_cached; k++)
      im->remote_cached = stoke__url_is_remote(paths[k]);
    if (rc != 0) stoke__set_tls_error(rc, "%s", err);
  }
  if (rc == 0) rc = stoke__scratch_probe(im->set, cfg, a, &im->scratch);
  stoke_source *src = NULL;
  if (rc == 0) {
    src = stoke__calloc(a, 1, sizeof *src);
    if (!src) rc = stoke__set_tls_error(STOKE_ENOMEM, "images: out of memory");
    else src->alloc = a;
  }
  if (rc == 0) {
    stoke_field_desc fields[2];
    memset(fields, 0, sizeof fields);
    stoke__tf_field_desc(&im->spec, &fields[0]);
    fields[0].name = "image";
    fields[1].name = "label";
    fields[1].dtype = STOKE_I64;
    rc = stoke__source_init(src, stoke__blobset_kind(im->set),
                            stoke__blobset_n_samples(im->set), 2, fields);
    if (rc == 0) {
      src->impl = im;
      src->ops = &image_ops;
      *out = src;
      return 0;
    }
  }
  if (src) stoke__source_release(src); /* ops unset: frees the common part */
  stoke__blobset_close(im->set);
  stoke__free(a, im->transform_text);
  stoke__free(a, im);
  return rc;
}

/* ---- queries that only image sources answer ------------------------------ */

static const image_impl *image_of(const stoke_source *src) {
  return src && src->ops == &image_ops ? src->impl : NULL;
}

size_t stoke_source_n_skipped(const stoke_source *src) {
  const image_impl *im = image_of(src);
  return im ? stoke__blobset_n_skipped(im->set) : 0;
}

const char *stoke_source_skipped(const stoke_source *src, size_t k,
                                 const char **reason) {
  const image_impl *im = image_of(src);
  if (reason) *reason = NULL;
  return im ? stoke__blobset_skipped(im->set, k, reason) : NULL;
}

const stoke__blobset *stoke__image_blobset(const stoke_source *src) {
  const image_impl *im = image_of(src);
  return im ? im->set : NULL;
}

int stoke_source_probe(const stoke_source *src, size_t index,
                       stoke_image_info *out) {
  const image_impl *im = image_of(src);
  if (!im || !out || index >= src->n_samples)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "probe: not an image source, or index %zu out "
                                "of range", index);
  stoke__decoder_opts o;
  stoke__decoder_opts_init(&o);
  o.alloc = im->alloc;
  stoke__decoder *dec;
  int rc = stoke__decoder_create(&o, &dec);
  if (rc != 0) return stoke__set_tls_error(rc, "probe: out of memory");
  stoke__blob_reader r;
  stoke__blob_reader_init(&r, im->alloc);
  const uint8_t *bytes;
  size_t n;
  char err[STOKE__ERRMSG_CAP];
  rc = stoke__image_probe(im->set, index, &r, dec, &bytes, &n, out, err,
                          sizeof err);
  if (rc != 0) stoke__set_tls_error(rc, "%s", err);
  stoke__blob_reader_free(&r);
  stoke__decoder_destroy(dec);
  return rc;
}

/* ---- stoke_verify's per-sample check (verify.c) -------------------------- */

int stoke__image_verify_decoder(const stoke_source *src,
                                stoke__decoder **out) {
  const image_impl *im = image_of(src);
  if (!im) return STOKE_EINVAL;
  stoke__decoder_opts o;
  stoke__decoder_opts_init(&o);
  o.max_pixels = im->cfg.max_pixels;
  /* A whole image at full scale: the pixel limit bounds it, not the
  ** loader's window limit. */
  o.max_bytes = 0;
  o.restart_cuts = false; /* every byte of the entropy data is decoded */
  return stoke__decoder_create(&o, out);
}

int stoke__image_verify(const stoke__blobset *set, size_t index,
                        stoke__blob_reader *r, stoke__decoder *dec,
                        uint64_t *bytes, char *err, size_t cap) {
  const uint8_t *data;
  size_t n;
  int rc = stoke__blobset_read(set, index, r, &data, &n, err, cap);
  if (rc != 0) return rc;
  *bytes = n;
  stoke__img_info info;
  rc = stoke__decode_probe(dec, data, n, &info, err, cap);
  if (rc == 0) {
    stoke__decode_req req = {0}; /* the whole image, full scale */
    stoke__image img;
    rc = stoke__decode(dec, data, n, &req, &img, err, cap);
  }
  stoke__blobset_done(set, index, data, n);
  return rc;
}

int stoke_source_pack_info(const stoke_source *src, stoke_pack_info *out) {
  const image_impl *im = image_of(src);
  if (!out) return stoke__set_tls_error(STOKE_EINVAL, "pack info: out is NULL");
  memset(out, 0, sizeof *out);
  if (!im || stoke__blobset_pack_info(im->set, out) != 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "pack info: not a packed source (%s)",
                                src ? src->kind : "NULL");
  return 0;
}

int stoke__image_cache_open(const stoke_source *src, const char *dir,
                            uint64_t max_bytes, const stoke__sys *sys,
                            const stoke_allocator *a, stoke__cache **out) {
  *out = NULL;
  const image_impl *im = image_of(src);
  const char *kind = im ? stoke__blobset_kind(im->set) : "";
  if (im && im->remote_cached) return 0; /* cached under the blobset */
  if (!im || (strcmp(kind, "folder") != 0 && strcmp(kind, "tar") != 0))
    return stoke__set_tls_error(
        STOKE_EINVAL,
        "config: cache_dir %s: the cache packs folder and tar image sources; "
        "this one is %s%s", dir, src ? src->kind : "NULL",
        im ? " (already packed: it reads at packed speed)" : "");
  stoke__cache_opts o = {.dir = dir, .max_bytes = max_bytes,
                         .fingerprint = stoke_source_fingerprint(src),
                         .sys = sys, .alloc = a};
  char err[STOKE__ERRMSG_CAP];
  int rc = stoke__cache_open(im->set, &o, out, err, sizeof err);
  return rc ? stoke__set_tls_error(rc, "%s", err) : 0;
}

unsigned stoke__source_keep_side(const stoke_source *src) {
  const image_impl *im = image_of(src);
  if (!im) return 0;
  const stoke__tf_spec *t = &im->spec;
  double side = STOKE__MAX(t->out_w, t->out_h);
  if (t->crop == STOKE__TF_CROP_RANDOM)
    side *= 2; /* a crop of a quarter of the image keeps its detail */
  else if (t->resize > 0)
    side = STOKE__MAX(side, t->resize * 4.0 / 3.0);
  return (unsigned)((side + 127) / 128) * 128;
}
