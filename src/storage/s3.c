/* s3.c — s3:// shard specs (s3.h): URL mapping, a small strict XML reader
** for S3's answers, and the listing of a prefix (the settings are
** s3_conf.c's). */
#define _POSIX_C_SOURCE 200809L
#include "storage/s3.h"

#include "storage/url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- URLs ---------------------------------------------------------------- */

static bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
         c == '~';
}

/* Append s[0..n) to buf at *w, percent-encoded (keeping '/' if asked):
** the form SigV4 signs, so libcurl's as-is canonical URI and query are
** right. */
static bool put_enc(char *buf, size_t cap, size_t *w, const char *s,
                    size_t n, bool keep_slash) {
  static const char hex[] = "0123456789ABCDEF";
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (unreserved(c) || (keep_slash && c == '/')) {
      if (*w + 1 >= cap) return false;
      buf[(*w)++] = (char)c;
    } else {
      if (*w + 3 >= cap) return false;
      buf[(*w)++] = '%';
      buf[(*w)++] = hex[c >> 4];
      buf[(*w)++] = hex[c & 15];
    }
  }
  buf[*w] = 0;
  return true;
}

static bool put(char *buf, size_t cap, size_t *w, const char *s) {
  size_t n = strlen(s);
  if (*w + n >= cap) return false;
  memcpy(buf + *w, s, n + 1);
  *w += n;
  return true;
}

int stoke__s3_http_url(const stoke__s3_conf *c, const char *s3url,
                       char *buf, size_t cap, char *err, size_t ecap) {
  return stoke__s3_http_url_in(c, c->region, s3url, buf, cap, err, ecap);
}

void stoke__s3_bucket_of(const char *s3url, char out[64]) {
  out[0] = 0;
  if (strncmp(s3url, "s3://", 5) != 0) return;
  const char *b = s3url + 5;
  size_t nb = strcspn(b, "/?#");
  if (nb == 0 || nb > 63) return;
  memcpy(out, b, nb);
  out[nb] = 0;
}

bool stoke__s3_region_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 63) return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
      return false;
  return true;
}

int stoke__s3_http_url_in(const stoke__s3_conf *c, const char *region,
                          const char *s3url, char *buf, size_t cap,
                          char *err, size_t ecap) {
  const char *b = s3url + 5; /* after "s3://" */
  size_t nb = strcspn(b, "/?#");
  const char *key = b[nb] == '/' ? b + nb + 1 : b + nb;
  size_t nk = strcspn(key, "?#");
  const char *query = key[nk] == '?' ? key + nk : "";
  char shown[512];
  if (nb == 0 || nb > 63) {
    stoke__url_redact(s3url, shown, sizeof shown);
    return stoke__errf(err, ecap, STOKE_EINVAL, "%s: not s3://BUCKET/KEY",
                       shown);
  }
  /* A bucket name is a host name's label in virtual-hosted style. */
  for (size_t i = 0; i < nb; i++)
    if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') ||
          b[i] == '-' || b[i] == '.')) {
      stoke__url_redact(s3url, shown, sizeof shown);
      return stoke__errf(err, ecap, STOKE_EINVAL, "%s: \"%.*s\" is not a "
                         "bucket name", shown, (int)nb, b);
    }
  size_t w = 0;
  buf[0] = 0;
  bool ok;
  if (c->endpoint[0]) {
    ok = put(buf, cap, &w, c->endpoint) && put(buf, cap, &w, "/") &&
         put_enc(buf, cap, &w, b, nb, false) && put(buf, cap, &w, "/");
  } else {
    ok = put(buf, cap, &w, "https://") && put_enc(buf, cap, &w, b, nb, false) &&
         put(buf, cap, &w, ".s3.") && put(buf, cap, &w, region) &&
         put(buf, cap, &w, ".amazonaws.com/");
  }
  ok = ok && put_enc(buf, cap, &w, key, nk, true) && put(buf, cap, &w, query);
  if (!ok) {
    stoke__url_redact(s3url, shown, sizeof shown);
    return stoke__errf(err, ecap, STOKE_EINVAL, "%s: the URL is too long",
                       shown);
  }
  return 0;
}

bool stoke__s3_is_prefix(const char *spec) {
  size_t n = strcspn(spec, "?#");
  if (n == 0 || spec[n - 1] == '/') return true;
  static const char *const kinds[] = {".stoke", ".tar", ".stoke}", ".tar}"};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    size_t m = strlen(kinds[k]);
    if (n >= m && memcmp(spec + n - m, kinds[k], m) == 0) return false;
  }
  return true;
}

/* ---- a strict, bounded XML reader ---------------------------------------- */

#define XML_DEPTH 8
#define XML_NAME 64
#define XML_TEXT STOKE__S3_XML_TEXT

typedef struct xml {
  const char *s, *end;
  char path[XML_DEPTH][XML_NAME]; /* names of the open elements */
  bool has_child[XML_DEPTH];
  int depth;
  char text[XML_TEXT]; /* the innermost element's decoded text */
  size_t n_text;
  /* called at each leaf element's end (one without children) */
  int (*leaf)(struct xml *x, void *arg);
  void *arg;
  char *err;
  size_t cap;
} xml;

#define XBAD(...) stoke__errf(x->err, x->cap, STOKE_EFORMAT, __VA_ARGS__)

static bool name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
         c == ':';
}

static bool space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Skip to just past the marker; false when the document ends first. */
static bool skip_past(xml *x, const char *marker) {
  size_t m = strlen(marker);
  for (; x->s + m <= x->end; x->s++)
    if (memcmp(x->s, marker, m) == 0) {
      x->s += m;
      return true;
    }
  return false;
}

static int text_put(xml *x, const char *bytes, size_t n) {
  if (x->n_text + n >= sizeof x->text)
    return XBAD("s3: an XML element's text is longer than %d bytes",
                XML_TEXT - 1);
  memcpy(x->text + x->n_text, bytes, n);
  x->n_text += n;
  x->text[x->n_text] = 0;
  return 0;
}

/* An entity at x->s ('&'): the five named ones and numeric references
** (as UTF-8; NUL and surrogates refused). */
static int entity(xml *x) {
  const char *semi = memchr(x->s, ';', (size_t)STOKE__MIN(x->end - x->s, 12));
  if (!semi) return XBAD("s3: a bad XML entity");
  const char *e = x->s + 1;
  size_t n = (size_t)(semi - e);
  static const struct {
    const char *name, *c;
  } named[] = {{"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""},
               {"apos", "'"}};
  x->s = semi + 1;
  for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
    if (strlen(named[k].name) == n && memcmp(e, named[k].name, n) == 0)
      return text_put(x, named[k].c, 1);
  if (n < 2 || e[0] != '#') return XBAD("s3: an unknown XML entity");
  unsigned long v = 0;
  bool hexa = e[1] == 'x';
  size_t i = hexa ? 2 : 1;
  if (i >= n) return XBAD("s3: a bad XML character reference");
  for (; i < n; i++) {
    char c = e[i];
    int d = c >= '0' && c <= '9'                 ? c - '0'
            : hexa && c >= 'a' && c <= 'f'       ? c - 'a' + 10
            : hexa && c >= 'A' && c <= 'F'       ? c - 'A' + 10
                                                 : -1;
    if (d < 0) return XBAD("s3: a bad XML character reference");
    v = v * (hexa ? 16 : 10) + (unsigned long)d;
  }
  if (v == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
    return XBAD("s3: a bad XML character reference");
  char u[4];
  size_t m;
  if (v < 0x80) {
    u[0] = (char)v;
    m = 1;
  } else if (v < 0x800) {
    u[0] = (char)(0xC0 | (v >> 6));
    u[1] = (char)(0x80 | (v & 0x3F));
    m = 2;
  } else if (v < 0x10000) {
    u[0] = (char)(0xE0 | (v >> 12));
    u[1] = (char)(0x80 | ((v >> 6) & 0x3F));
    u[2] = (char)(0x80 | (v & 0x3F));
    m = 3;
  } else {
    u[0] = (char)(0xF0 | (v >> 18));
    u[1] = (char)(0x80 | ((v >> 12) & 0x3F));
    u[2] = (char)(0x80 | ((v >> 6) & 0x3F));
    u[3] = (char)(0x80 | (v & 0x3F));
    m = 4;
  }
  return text_put(x, u, m);
}

/* A tag's name at x->s into name; false for none or one too long. */
static bool tag_name(xml *x, char name[XML_NAME]) {
  size_t n = 0;
  while (x->s < x->end && name_char(*x->s)) {
    if (n + 1 >= XML_NAME) return false;
    name[n++] = *x->s++;
  }
  name[n] = 0;
  return n > 0;
}

static int xml_walk(xml *x) {
  bool root_seen = false;
  x->depth = 0;
  while (x->s < x->end) {
    char c = *x->s;
    if (c != '<') {
      if (x->depth == 0) {
        if (!space(c)) return XBAD("s3: text outside the XML document");
        x->s++;
      } else if (c == '&') {
        int rc = entity(x);
        if (rc) return rc;
      } else if (c == 0) {
        return XBAD("s3: a NUL byte in the XML answer");
      } else {
        int rc = text_put(x, x->s++, 1);
        if (rc) return rc;
      }
      continue;
    }
    x->s++;
    if (x->s < x->end && *x->s == '?') {
      if (!skip_past(x, "?>")) return XBAD("s3: the XML answer is cut off");
      continue;
    }
    if (x->end - x->s >= 3 && memcmp(x->s, "!--", 3) == 0) {
      if (!skip_past(x, "-->")) return XBAD("s3: the XML answer is cut off");
      continue;
    }
    if (x->s < x->end && *x->s == '!')
      return XBAD("s3: unexpected markup (DOCTYPE or CDATA) in the XML "
                  "answer");
    char name[XML_NAME];
    if (x->s < x->end && *x->s == '/') { /* an end tag */
      x->s++;
      if (!tag_name(x, name)) return XBAD("s3: a bad XML end tag");
      while (x->s < x->end && space(*x->s)) x->s++;
      if (x->s >= x->end || *x->s != '>')
        return XBAD("s3: a bad XML end tag");
      x->s++;
      if (x->depth == 0 || strcmp(name, x->path[x->depth - 1]) != 0)
        return XBAD("s3: the XML tags do not match (</%s>)", name);
      if (!x->has_child[x->depth - 1] && x->leaf) {
        int rc = x->leaf(x, x->arg);
        if (rc) return rc;
      }
      x->depth--;
      x->n_text = 0;
      x->text[0] = 0;
      continue;
    }
    if (!tag_name(x, name)) return XBAD("s3: a bad XML tag");
    if (x->depth == 0 && root_seen)
      return XBAD("s3: more than one XML root element");
    /* Attributes (xmlns=...) are skipped, quoted values and all. */
    char quote = 0;
    bool empty = false;
    for (;; x->s++) {
      if (x->s >= x->end) return XBAD("s3: the XML answer is cut off");
      char t = *x->s;
      if (quote) {
        if (t == quote) quote = 0;
        else if (t == '<') return XBAD("s3: '<' in an XML attribute");
      } else if (t == '"' || t == '\'') {
        quote = t;
      } else if (t == '>') {
        empty = x->s[-1] == '/'; /* the name precedes it: in bounds */
        x->s++;
        break;
      }
    }
    if (x->depth >= XML_DEPTH)
      return XBAD("s3: the XML answer nests deeper than %d", XML_DEPTH);
    if (x->depth > 0) x->has_child[x->depth - 1] = true;
    root_seen = true;
    memcpy(x->path[x->depth], name, XML_NAME);
    x->has_child[x->depth] = false;
    x->depth++;
    x->n_text = 0;
    x->text[0] = 0;
    if (empty) { /* <X/>: a leaf with no text */
      if (x->leaf) {
        int rc = x->leaf(x, x->arg);
        if (rc) return rc;
      }
      x->depth--;
    }
  }
  if (x->depth != 0 || !root_seen)
    return XBAD("s3: the XML answer is cut off");
  return 0;
}

/* Walk text[0..n) with leaf(x, arg) at each leaf, the reader on the heap
** (4 KiB of text: not on a caller's stack).  STOKE_ENOMEM, or the walk's
** result. */
static int xml_run(const char *text, size_t n,
                   int (*leaf)(xml *x, void *arg), void *arg, char *err,
                   size_t cap) {
  xml *x = stoke__calloc(NULL, 1, sizeof *x);
  if (!x) return stoke__errf(err, cap, STOKE_ENOMEM, "s3: out of memory");
  x->s = text;
  x->end = text + n;
  x->leaf = leaf;
  x->arg = arg;
  x->err = err;
  x->cap = cap;
  int rc = xml_walk(x);
  stoke__free(NULL, x);
  return rc;
}

static bool at(const xml *x, const char *a, const char *b, const char *c) {
  int want = c ? 3 : 2;
  return x->depth == want && strcmp(x->path[0], a) == 0 &&
         strcmp(x->path[1], b) == 0 && (!c || strcmp(x->path[2], c) == 0);
}

typedef struct code_find {
  const char *name; /* the element of Error whose text is wanted */
  char *code;
  size_t cap;
  bool found;
} code_find;

static int code_leaf(xml *x, void *arg) {
  code_find *f = arg;
  if (!f->found && at(x, "Error", f->name, NULL)) {
    snprintf(f->code, f->cap, "%s", x->text);
    f->found = true;
  }
  return 0;
}

/* Error/NAME's text into out; a body cut off at the client's bound still
** names what came before the cut: keep what was found. */
static bool error_field(const char *body, size_t n, const char *name,
                        char *out, size_t cap) {
  if (cap) out[0] = 0;
  if (!body || n == 0 || cap == 0) return false;
  code_find f = {name, out, cap, false};
  char e[64];
  (void)xml_run(body, n, code_leaf, &f, e, sizeof e);
  return f.found;
}

bool stoke__s3_error_code(const char *body, size_t n, char *code,
                          size_t cap) {
  bool found = error_field(body, n, "Code", code, cap);
  /* A Code is a word: anything else is not shown (it is the server's). */
  for (const char *p = code; found && *p; p++)
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
          (*p >= '0' && *p <= '9') || *p == '.' || *p == '_'))
      found = false;
  if (!found || !code[0]) {
    if (cap) code[0] = 0;
    return false;
  }
  return true;
}

/* The region of an AWS S3 endpoint host, as a 301's <Endpoint> names it:
** "b.s3.eu-west-1.amazonaws.com", "s3.eu-west-1.amazonaws.com", the
** older "b.s3-eu-west-1.amazonaws.com", and "b.s3.amazonaws.com" (the
** global endpoint: us-east-1).  False for any other host (a custom
** endpoint names no region in its host). */
static bool endpoint_region(const char *host, char region[64]) {
  static const char aws[] = ".amazonaws.com";
  size_t n = strlen(host), a = sizeof aws - 1;
  if (n <= a || strcmp(host + n - a, aws) != 0) return false;
  /* The label "s3" (then ".region") or "s3-region", at the start or
  ** after a dot, the region running to the ".amazonaws.com". */
  for (size_t i = 0; i + 2 <= n - a; i++) {
    if ((i > 0 && host[i - 1] != '.') || strncmp(host + i, "s3", 2) != 0)
      continue;
    size_t from = i + 2;
    if (from == n - a) { /* "b.s3.amazonaws.com" */
      snprintf(region, 64, "us-east-1");
      return true;
    }
    if (host[from] != '.' && host[from] != '-') continue;
    from++;
    size_t len = n - a - from;
    if (len == 0 || len >= 64) return false;
    memcpy(region, host + from, len);
    region[len] = 0;
    return stoke__s3_region_ok(region);
  }
  return false;
}

bool stoke__s3_error_region(const char *body, size_t n, char region[64]) {
  /* A region goes into a host name and a signature's scope: only a
  ** region name is kept (stoke__s3_region_ok), as for the header.  No
  ** <Region>: a 301 PermanentRedirect may name only the <Endpoint>. */
  char host[256];
  if (error_field(body, n, "Region", region, 64) &&
      stoke__s3_region_ok(region))
    return true;
  if (error_field(body, n, "Endpoint", host, sizeof host) &&
      endpoint_region(host, region))
    return true;
  region[0] = 0;
  return false;
}

typedef struct list_page {
  int (*on_key)(const char *key, void *arg);
  void *arg;
  bool *truncated;
  char *token;
  size_t token_cap;
} list_page;

static int list_leaf(xml *x, void *arg) {
  list_page *p = arg;
  if (strcmp(x->path[0], "ListBucketResult") != 0)
    return XBAD("s3: the listing is not a ListBucketResult (<%s>)",
                x->path[0]);
  if (at(x, "ListBucketResult", "Contents", "Key")) {
    if (!x->text[0]) return XBAD("s3: an empty Key in the listing");
    return p->on_key(x->text, p->arg);
  }
  if (at(x, "ListBucketResult", "IsTruncated", NULL)) {
    if (strcmp(x->text, "true") == 0) *p->truncated = true;
    else if (strcmp(x->text, "false") == 0) *p->truncated = false;
    else return XBAD("s3: IsTruncated is neither true nor false");
  }
  if (at(x, "ListBucketResult", "NextContinuationToken", NULL)) {
    if (strlen(x->text) >= p->token_cap)
      return XBAD("s3: a NextContinuationToken longer than %zu bytes",
                  p->token_cap - 1);
    memcpy(p->token, x->text, strlen(x->text) + 1);
  }
  return 0;
}

int stoke__s3_parse_list(const char *xml_text, size_t n,
                         int (*on_key)(const char *key, void *arg),
                         void *arg, bool *truncated, char *token,
                         size_t token_cap, char *err, size_t cap) {
  *truncated = false;
  if (token_cap) token[0] = 0;
  list_page p = {on_key, arg, truncated, token, token_cap};
  int rc = xml_run(xml_text, n, list_leaf, &p, err, cap);
  if (rc == 0 && *truncated && !token[0])
    rc = stoke__errf(err, cap, STOKE_EFORMAT, "s3: a truncated listing "
                     "without a NextContinuationToken");
  return rc;
}

/* ---- a listing page's URL ----------------------------------------------- */

bool stoke__s3_list_url(const char *bucket, size_t n_bucket,
                        const char *prefix, size_t n_prefix,
                        const char *token, unsigned max_keys, char *buf,
                        size_t cap) {
  /* The query in SigV4's canonical form (names sorted, values encoded):
  ** libcurl 7.x signs the query as it is written. */
  size_t w = 0;
  bool ok = put(buf, cap, &w, "s3://") &&
            put_enc(buf, cap, &w, bucket, n_bucket, false) &&
            put(buf, cap, &w, "/?");
  if (ok && token && token[0])
    ok = put(buf, cap, &w, "continuation-token=") &&
         put_enc(buf, cap, &w, token, strlen(token), false) &&
         put(buf, cap, &w, "&");
  ok = ok && put(buf, cap, &w, "list-type=2&");
  if (ok && max_keys) {
    char mk[32];
    snprintf(mk, sizeof mk, "max-keys=%u&", max_keys);
    ok = put(buf, cap, &w, mk);
  }
  return ok && put(buf, cap, &w, "prefix=") &&
         put_enc(buf, cap, &w, prefix, n_prefix, false);
}
