/* s3_list.c — the listing of an s3:// prefix (s3.h): ListObjectsV2 page
** after page through the http client, the keys of one kind, sorted.  Apart
** from s3.c, which the http client uses, so that neither file needs the
** other's caller. */
#define _POSIX_C_SOURCE 200809L
#include "storage/s3.h"

#include "storage/blob.h"
#include "storage/http.h"
#include "storage/url.h"

#include "stoke.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define URL_CAP 8192

/* ---- listing a prefix ---------------------------------------------------- */

/* One answer page's bound: 1000 keys of at most 1024 bytes, with their
** other elements, are about 1.5 MiB. */
#define PAGE_MAX (4u << 20)
/* Pages of one listing: 1000 keys each is a million shards. */
#define MAX_PAGES 1000
#define TOKEN_CAP 2048
/* As many shards as a path pattern may give (blob.c). */
#define MAX_KEYS 1000000

typedef struct lister {
  const stoke_allocator *a;
  const char *bucket;
  size_t n_bucket;
  stoke__blob_strs keys;
  size_t n_stoke, n_tar;
  char *err;
  size_t cap;
} lister;

static int add_key(const char *key, void *arg) {
  lister *l = arg;
  bool stoke = stoke__ends_with(key, ".stoke"), tar = stoke__ends_with(key,
                                                                       ".tar");
  if (!stoke && !tar) return 0; /* not a shard: an index, a README, ... */
  l->n_stoke += stoke;
  l->n_tar += tar;
  if (l->keys.n >= MAX_KEYS)
    return stoke__errf(l->err, l->cap, STOKE_EINVAL, "s3: a listing of more "
                       "than %d shards", MAX_KEYS);
  /* "s3://", a bucket (at most 63 bytes), '/', a key (s3.h's bound). */
  char url[5 + 64 + 1 + STOKE__S3_XML_TEXT + 1];
  snprintf(url, sizeof url, "s3://%.*s/%s", (int)l->n_bucket, l->bucket, key);
  int rc = stoke__blob_strs_add(&l->keys, l->a, url, NULL);
  return rc ? stoke__errf(l->err, l->cap, STOKE_ENOMEM, "out of memory") : 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int stoke__s3_list(stoke__http *h, const char *spec, const stoke_allocator *a,
                   char ***out, size_t *n_out, int *kind, char *err,
                   size_t cap) {
  *out = NULL;
  *n_out = 0;
  *kind = 0;
  const char *bucket = spec + 5;
  size_t nb = strcspn(bucket, "/?#");
  const char *prefix = bucket[nb] == '/' ? bucket + nb + 1 : bucket + nb;
  size_t np = strcspn(prefix, "?#");
  char shown[1024];
  stoke__url_redact(spec, shown, sizeof shown);
  char e[STOKE__ERRMSG_CAP] = "";
  lister l = {a, bucket, nb, {0}, 0, 0, e, sizeof e};
  char *page = stoke__alloc(a, PAGE_MAX);
  char *url = stoke__alloc(a, URL_CAP);
  char token[TOKEN_CAP] = "";
  int rc = page && url ? 0
                       : stoke__errf(err, cap, STOKE_ENOMEM, "out of memory");
  unsigned max_keys = stoke__http_s3_max_keys(h);
  for (unsigned n_pages = 0; rc == 0; n_pages++) {
    if (n_pages >= MAX_PAGES) {
      rc = stoke__errf(err, cap, STOKE_EFORMAT, "listing %s: more than %d "
                       "pages", shown, MAX_PAGES);
      break;
    }
    bool ok = stoke__s3_list_url(bucket, nb, prefix, np, token, max_keys, url,
                                 URL_CAP);
    if (!ok) {
      rc = stoke__errf(err, cap, STOKE_EINVAL, "listing %s: the URL is too "
                       "long", shown);
      break;
    }
    size_t got = 0;
    rc = stoke__http_get_body(h, url, page, PAGE_MAX, &got, e, sizeof e);
    if (rc) {
      stoke__errf(err, cap, rc, "listing %s: %s", shown, e);
      break;
    }
    bool truncated;
    char next[TOKEN_CAP];
    rc = stoke__s3_parse_list(page, got, add_key, &l, &truncated, next,
                              sizeof next, e, sizeof e);
    if (rc) {
      stoke__errf(err, cap, rc, "listing %s: %s", shown, e);
      break;
    }
    if (!truncated) break;
    if (strcmp(next, token) == 0) {
      rc = stoke__errf(err, cap, STOKE_EFORMAT, "listing %s: the server "
                       "gave the same continuation token twice", shown);
      break;
    }
    memcpy(token, next, sizeof token);
  }
  stoke__free(a, page);
  stoke__free(a, url);
  if (rc == 0 && l.n_stoke && l.n_tar)
    rc = stoke__errf(err, cap, STOKE_EINVAL, "%s holds both packed (.stoke) "
                     "and tar (.tar) shards: name one kind (a longer "
                     "prefix, or a {a,b} list of keys)", shown);
  if (rc == 0 && l.keys.n == 0)
    rc = stoke__errf(err, cap, STOKE_EINVAL, "%s: no .stoke or .tar object "
                     "under this prefix", shown);
  if (rc == 0) {
    /* S3 lists in UTF-8 byte order already; a server that does not must
    ** not change the shards' order (it decides the batches). */
    qsort(l.keys.s, l.keys.n, sizeof *l.keys.s, cmp_str);
    rc = stoke__blob_strs_hand_out(&l.keys, a, out, n_out, err, cap);
    if (rc == 0) *kind = l.n_stoke ? STOKE_IMAGES_PACKED : STOKE_IMAGES_TAR;
  }
  stoke__blob_strs_free(&l.keys, a);
  return rc;
}
