/* url.c — remote shard specs and their shown form (url.h). */
#include "storage/url.h"

#include "stoke.h"

#include <string.h>

static bool prefix_nocase(const char *s, const char *p) {
  for (; *p; s++, p++) {
    char c = *s;
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != *p) return false;
  }
  return true;
}

bool stoke__url_is_http(const char *spec) {
  return spec && (prefix_nocase(spec, "http://") ||
                  prefix_nocase(spec, "https://"));
}

bool stoke__url_is_s3(const char *spec) {
  return spec && prefix_nocase(spec, "s3://");
}

bool stoke__url_is_remote(const char *spec) {
  return stoke__url_is_http(spec) || stoke__url_is_s3(spec);
}

/* Where the authority ("user@host:port") of url starts and ends, or false
** for a string without "://". */
static bool authority(const char *url, const char **start,
                      const char **end) {
  const char *sep = strstr(url, "://");
  if (!sep) return false;
  *start = sep + 3;
  *end = *start + strcspn(*start, "/?#");
  return true;
}

void stoke__url_redact(const char *url, char *buf, size_t cap) {
  if (cap == 0) return;
  const char *a, *e;
  if (!authority(url, &a, &e)) {
    if (buf != url) {
      size_t n = strlen(url);
      if (n >= cap) n = cap - 1;
      memmove(buf, url, n);
      buf[n] = 0;
    }
    return;
  }
  /* The last '@' of the authority ends the user-info (a password may hold
  ** an unescaped '@'). */
  const char *host = a;
  for (const char *p = a; p < e; p++)
    if (*p == '@') host = p + 1;
  size_t n_path = strcspn(e, "?#");
  /* The query and fragment become "?..." (cut to their own length, so
  ** that the shown form is never longer). */
  size_t n_query = strlen(e + n_path);
  /* The pieces in the order written; memmove because buf may be url. */
  size_t w = 0;
  const struct {
    const char *s;
    size_t n;
  } piece[] = {{url, (size_t)(a - url)},
               {host, (size_t)(e - host)},
               {e, n_path},
               {"?...", n_query < 4 ? n_query : 4}};
  for (size_t k = 0; k < sizeof piece / sizeof piece[0]; k++) {
    size_t n = piece[k].n;
    if (w + n >= cap) n = cap - 1 - w;
    memmove(buf + w, piece[k].s, n);
    w += n;
  }
  buf[w] = 0;
}

bool stoke__url_shows_secret(const char *url, const char *text) {
  const char *a, *e;
  if (!authority(url, &a, &e)) return false;
  const char *at = NULL;
  for (const char *p = a; p < e; p++)
    if (*p == '@') at = p;
  if (at && at > a) {
    char userinfo[512];
    size_t n = (size_t)(at - a);
    if (n >= sizeof userinfo) n = sizeof userinfo - 1;
    memcpy(userinfo, a, n);
    userinfo[n] = 0;
    if (strstr(text, userinfo)) return true;
  }
  const char *q = strchr(e, '?');
  if (q && q[1]) {
    char query[512];
    size_t n = strcspn(q + 1, "#");
    if (n >= sizeof query) n = sizeof query - 1;
    memcpy(query, q + 1, n);
    query[n] = 0;
    if (n && strstr(text, query)) return true;
  }
  return false;
}

int stoke_path_is_remote(const char *path) {
  return stoke__url_is_remote(path);
}

void stoke_path_shown(const char *path, char *buf, size_t cap) {
  if (!buf || cap == 0) return;
  stoke__url_redact(path ? path : "", buf, cap);
}
