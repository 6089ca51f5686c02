/* url.h — what the storage layer knows of a URL: whether a shard spec is
** remote, and the form of it that may be shown.  Private to src/.
**
** A URL may carry secrets: user-info ("https://user:pass@host/...") and,
** in a presigned URL, a signature in its query.  Everything stoke writes
** (errors, describe, logs, JSON, traces) names a shard by its shown form:
** scheme, host, port and path, with the user-info dropped and the query
** replaced by "?...". */
#ifndef STOKE_STORAGE_URL_H
#define STOKE_STORAGE_URL_H

#include <stdbool.h>
#include <stddef.h>

/* An http://, https:// or s3:// URL (any case in the scheme).  An s3://
** URL is read through the same client (http.c maps it, s3.h). */
bool stoke__url_is_remote(const char *spec);
/* An http:// or https:// URL: what libcurl is given. */
bool stoke__url_is_http(const char *spec);
/* An s3:// URL (s3.h): mapped to an http(s) one before a request. */
bool stoke__url_is_s3(const char *spec);

/* The shown form of url into buf[0..cap) (always NUL-terminated when cap >
** 0); never longer than url, so it may be written over url itself (buf ==
** url).  A string that is not a URL is copied unchanged. */
void stoke__url_redact(const char *url, char *buf, size_t cap);

/* Whether text holds url's user-info or query (a test's check that a
** message shows no secret). */
bool stoke__url_shows_secret(const char *url, const char *text);

#endif /* STOKE_STORAGE_URL_H */
