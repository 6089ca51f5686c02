/* s3.h — shards given as s3://bucket/key (docs/remote.md, "S3"): the
** settings from the AWS_* environment, the mapping of an s3:// URL to the
** http(s) URL a request goes to, S3's XML answers (a listing, an error's
** Code) and the listing of a prefix.  Private to src/.
**
** An s3:// URL is what every message shows ("s3://bucket/key": it holds
** no secret); the http(s) URL it maps to is only ever given to libcurl.
** The secret key and the session token live in the http client's copy of
** the settings and go to libcurl only (CURLOPT_PASSWORD, a header): never
** into a message. */
#ifndef STOKE_STORAGE_S3_H
#define STOKE_STORAGE_S3_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>

struct stoke__http;

/* The S3 settings (the environment, then the AWS shared files), read once
** when a source is created and copied by value into the http client
** (fixed arrays: nothing to own). */
typedef struct stoke__s3_conf {
  char endpoint[512]; /* AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else the
                         profile's endpoint_url; no trailing '/'; "" = AWS */
  char region[64];    /* AWS_REGION, AWS_DEFAULT_REGION, the profile's
                         region, else us-east-1 */
  char key_id[256];   /* AWS_ACCESS_KEY_ID, else the profile's; "" =
                         unsigned requests */
  char secret[256];   /* AWS_SECRET_ACCESS_KEY, else the profile's */
  char token[4096];   /* AWS_SESSION_TOKEN, else the profile's; "" = none */
  unsigned max_keys;  /* STOKE_TEST_S3_MAX_KEYS (a test knob: a listing's
                         page size, so that pagination happens); 0 = S3's */
} stoke__s3_conf;

/* Read the settings from the environment into *c, then what it left
** unset from the profile of the AWS shared files (s3_conf.c).
** STOKE_EINVAL (naming the variable or the file and line, never a value)
** when one is too long, the key id comes without its secret, or the
** profile is missing or gets its keys in ways stoke does not follow. */
int stoke__s3_conf_read(stoke__s3_conf *c, char *err, size_t cap);

/* The same into a copy allocated through a (*out; freed with
** stoke__s3_conf_free).  STOKE_ENOMEM, or conf_read's errors. */
int stoke__s3_conf_new(const stoke_allocator *a, stoke__s3_conf **out,
                       char *err, size_t cap);
/* c's bytes zeroed (the secret and the token are not left in freed
** memory), then freed.  NULL: nothing. */
void stoke__s3_conf_free(const stoke_allocator *a, stoke__s3_conf *c);
/* Zero p[0..n) so that the compiler cannot drop it as a dead store: for
** copies of a secret. */
void stoke__s3_wipe(void *p, size_t n);

/* The http(s) URL for s3url ("s3://bucket/key[?query]") into buf:
** path-style ENDPOINT/bucket/key with an endpoint, else virtual-hosted
** https://bucket.s3.REGION.amazonaws.com/key; the key percent-encoded
** (RFC 3986 unreserved characters and '/' kept), the query as given.
** STOKE_EINVAL for a URL without a bucket or too long for buf. */
int stoke__s3_http_url(const stoke__s3_conf *c, const char *s3url,
                       char *buf, size_t cap, char *err, size_t ecap);
/* The same in region (a region name; c->region's form) instead of
** c->region: for a bucket S3 said lives elsewhere (x-amz-bucket-region). */
int stoke__s3_http_url_in(const stoke__s3_conf *c, const char *region,
                          const char *s3url, char *buf, size_t cap,
                          char *err, size_t ecap);

/* The bucket of s3url into out (NUL-terminated; "" when there is none or
** it is longer than 63 bytes, S3's limit). */
void stoke__s3_bucket_of(const char *s3url, char out[64]);

/* Whether s is a region name as the settings accept one ([a-z0-9-]+, at
** most 63 bytes): what an answer's x-amz-bucket-region must be before it
** is used in a host name or a signature's scope. */
bool stoke__s3_region_ok(const char *s);

/* Whether an s3:// spec names a prefix to list rather than an object: it
** ends in '/' or in neither ".stoke" nor ".tar". */
bool stoke__s3_is_prefix(const char *spec);

/* S3's error Code in an XML error body ("<Error><Code>NoSuchKey</Code>")
** into code (always NUL-terminated); false when body is not one. */
bool stoke__s3_error_code(const char *body, size_t n, char *code,
                          size_t cap);

/* The region S3 names in an error body's <Region> (a wrong region's 400
** AuthorizationHeaderMalformed or 301 PermanentRedirect, when it sends no
** x-amz-bucket-region header), or else in the AWS host of its <Endpoint>
** ("b.s3.eu-west-1.amazonaws.com", "b.s3-eu-west-1.amazonaws.com";
** "b.s3.amazonaws.com" is us-east-1), into region; false, and "", when
** there is none or it is not a region name (stoke__s3_region_ok). */
bool stoke__s3_error_region(const char *body, size_t n, char region[64]);

/* The longest text of an XML element the reader keeps: a listed key
** (S3's are at most 1024 bytes) fits. */
#define STOKE__S3_XML_TEXT 4096

/* One page of a ListObjectsV2 answer: on_key(key, arg) for each
** ListBucketResult/Contents/Key in document order (entity-decoded),
** *truncated from IsTruncated, the NextContinuationToken into token.
** Strict and bounded: at most 8 levels, names of 64 bytes, texts of 4096,
** no DOCTYPE or CDATA, tags balanced; anything else is STOKE_EFORMAT. */
int stoke__s3_parse_list(const char *xml, size_t n,
                         int (*on_key)(const char *key, void *arg),
                         void *arg, bool *truncated, char *token,
                         size_t token_cap, char *err, size_t cap);

/* The s3:// URL of one ListObjectsV2 page into buf: bucket, prefix, the
** continuation token (NULL or "": the first page) and max-keys (0: S3's),
** the query in SigV4's canonical order and encoding.  False when it does
** not fit. */
bool stoke__s3_list_url(const char *bucket, size_t n_bucket,
                        const char *prefix, size_t n_prefix,
                        const char *token, unsigned max_keys, char *buf,
                        size_t cap);

/* s3_list.c: list every object under the prefix spec ("s3://bucket/prefix") through
** h, page after page, and keep those of one kind: *out (sorted, each
** "s3://bucket/key") and *kind (STOKE_IMAGES_PACKED or STOKE_IMAGES_TAR).
** An empty result, or one holding both kinds, is STOKE_EINVAL naming the
** prefix. */
int stoke__s3_list(struct stoke__http *h, const char *spec,
                   const stoke_allocator *a, char ***out, size_t *n_out,
                   int *kind, char *err, size_t cap);

#endif /* STOKE_STORAGE_S3_H */
