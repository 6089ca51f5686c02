/* test_remote.c — the remote byte source (src/storage/http.c, url.c,
** packed_remote.c) against a scripted HTTP server in this process: each
** connection gets the next canned answer, so that retries, the budget,
** short and long bodies, ignored ranges and a hostile object size are
** checked by counts, never by time; s3:// requests (signed headers, S3
** error Codes, hostile listings) through the same client.  The shown form
** of URLs, and URL patterns (braces expanded, '?' not a glob), without a
** server. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "storage/blob.h"
#include "storage/http.h"
#include "storage/remote.h"
#include "storage/s3.h"
#include "storage/url.h"

/* ---- the shown form ------------------------------------------------------ */

static void shown(const char *url, const char *want) {
  char buf[256];
  stoke__url_redact(url, buf, sizeof buf);
  assert_string_equal(buf, want);
  assert_true(strlen(buf) <= strlen(url));
  char in_place[256];
  snprintf(in_place, sizeof in_place, "%s", url);
  stoke__url_redact(in_place, in_place, sizeof in_place);
  assert_string_equal(in_place, want);
}

static void test_url_shown(void **state) {
  (void)state;
  shown("http://h:8080/a/b.stoke", "http://h:8080/a/b.stoke");
  shown("https://user:pw@h/a.tar", "https://h/a.tar");
  shown("https://u:p@ss@h/a.tar", "https://h/a.tar"); /* '@' in the secret */
  shown("http://h/a.stoke?X-Amz-Signature=abc&x=1", "http://h/a.stoke?...");
  shown("http://h/a.stoke#frag", "http://h/a.stoke?...");
  shown("http://h/a?b", "http://h/a?."); /* "?..." cut to the query's size */
  shown("http://u:p@h", "http://h");
  shown("train/dog/1.jpg", "train/dog/1.jpg");
  char small[12];
  stoke__url_redact("http://user:pw@host/path", small, sizeof small);
  assert_string_equal(small, "http://host");
  char pub[64];
  stoke_path_shown("https://k:s@h/x.stoke?sig=1", pub, sizeof pub);
  assert_string_equal(pub, "https://h/x.stoke?...");
  assert_int_equal(stoke_path_is_remote("HTTPS://h/x.stoke"), 1);
  assert_int_equal(stoke_path_is_remote("http://h/{0..3}.tar"), 1);
  assert_int_equal(stoke_path_is_remote("file:///data/x.stoke"), 0);
  assert_int_equal(stoke_path_is_remote("train/dog"), 0);
  assert_int_equal(stoke_path_is_remote(NULL), 0);
}

static void test_url_secret_and_scheme(void **state) {
  (void)state;
  assert_true(stoke__url_is_remote("http://h/x"));
  assert_true(stoke__url_is_remote("HTTPS://h/x"));
  assert_false(stoke__url_is_remote("httpx://h/x"));
  assert_false(stoke__url_is_remote("/data/http://x"));
  assert_false(stoke__url_is_remote(NULL));
  const char *u = "https://ak:SECRET@h/x.stoke?sig=SIG";
  assert_true(stoke__url_shows_secret(u, "oops ak:SECRET here"));
  assert_true(stoke__url_shows_secret(u, "oops sig=SIG"));
  assert_false(stoke__url_shows_secret(u, "GET https://h/x.stoke?..."));
}

static void test_url_patterns(void **state) {
  (void)state;
  const char *specs[] = {"http://h/t-{00..02}.stoke?sig=a*b"};
  char **paths;
  size_t n;
  char err[256];
  assert_int_equal(stoke__blob_expand(specs, 1, NULL, &paths, &n, err,
                                      sizeof err), 0);
  assert_int_equal(n, 3);
  assert_string_equal(paths[0], "http://h/t-00.stoke?sig=a*b");
  assert_string_equal(paths[2], "http://h/t-02.stoke?sig=a*b");
  free(paths);
  const char *mixed[] = {"http://h/a.stoke", "/local/b.stoke"};
  assert_true(stoke__specs_remote(mixed, 2));
  assert_false(stoke__specs_remote(mixed + 1, 1));
}

/* ---- a scripted server --------------------------------------------------- */

#define MAX_SCRIPT 16

typedef struct server {
  int fd;
  int port;
  pthread_t thread;
  const char *script[MAX_SCRIPT]; /* answer k for connection k */
  size_t n_script;
  atomic_int served;
  char last_request[1024];
} server;

static void *serve(void *user) {
  server *s = user;
  for (size_t k = 0; k < s->n_script; k++) {
    int c = accept(s->fd, NULL, NULL);
    if (c < 0) break;
    char req[1024];
    size_t got = 0;
    while (got + 1 < sizeof req) { /* the headers, up to the empty line */
      ssize_t r = read(c, req + got, sizeof req - 1 - got);
      if (r <= 0) break;
      got += (size_t)r;
      req[got] = 0;
      if (strstr(req, "\r\n\r\n")) break;
    }
    req[got] = 0;
    memcpy(s->last_request, req, got + 1);
    const char *a = s->script[k];
    size_t n = strlen(a);
    for (size_t w = 0; w < n;) {
      ssize_t r = write(c, a + w, n - w);
      if (r <= 0) break;
      w += (size_t)r;
    }
    atomic_fetch_add(&s->served, 1);
    close(c); /* every answer on its own connection: a reset or a cut-off
                 body is the close itself */
  }
  return NULL;
}

static void server_start(server *s, const char *const *script, size_t n) {
  memset(s, 0, sizeof *s);
  assert_true(n <= MAX_SCRIPT);
  for (size_t k = 0; k < n; k++) s->script[k] = script[k];
  s->n_script = n;
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(s->fd >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &len), 0);
  s->port = ntohs(a.sin_port);
  assert_int_equal(listen(s->fd, 16), 0);
  assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

/* Joins the server: the script must have been used up (or the listening
** socket is shut down first, which ends accept). */
static void server_stop(server *s) {
  shutdown(s->fd, SHUT_RDWR);
  pthread_join(s->thread, NULL);
  close(s->fd);
}

#define R206(range, total, body)                                             \
  "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " range "/" total    \
  "\r\nContent-Length: " #body "\r\nConnection: close\r\n\r\n"

static const char ANSWER_503[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
    "Connection: close\r\n\r\n";

static stoke__http *client(unsigned attempts, unsigned budget) {
  stoke__http_options o = {0};
  o.max_attempts = attempts;
  o.retry_budget = budget;
  o.backoff_ms = 1;
  o.stall_timeout_ms = 2000;
  o.connect_timeout_ms = 2000;
  stoke__http *h;
  char err[256];
  assert_int_equal(stoke__http_create(&o, NULL, &h, err, sizeof err), 0);
  return h;
}

static void url_of(const server *s, char *buf, size_t cap,
                   const char *path) {
  snprintf(buf, cap, "http://u:SECRET@127.0.0.1:%d%s", s->port, path);
}

static void test_retries_then_range(void **state) {
  (void)state;
  const char *script[] = {ANSWER_503, ANSWER_503,
                          R206("2-5", "10", 4) "abcd"};
  server s;
  server_start(&s, script, 3);
  stoke__http *h = client(5, 100);
  char url[128], err[512], buf[4];
  url_of(&s, url, sizeof url, "/x.stoke");
  uint64_t total = 0;
  assert_int_equal(stoke__http_get_range(h, url, 2, 4, buf, &total, err,
                                         sizeof err), 0);
  assert_memory_equal(buf, "abcd", 4);
  assert_int_equal(total, 10);
  assert_non_null(strstr(s.last_request, "Range: bytes=2-5"));
  stoke__http_counts c;
  stoke__http_counts_get(h, &c);
  assert_int_equal(c.requests, 3);
  assert_int_equal(c.retries, 2);
  assert_int_equal(c.throttled, 2);
  assert_int_equal(c.bytes, 4);
  stoke__http_destroy(h);
  server_stop(&s);
}

static void test_gives_up_naming_url_status_attempts(void **state) {
  (void)state;
  const char *script[] = {ANSWER_503, ANSWER_503, ANSWER_503};
  server s;
  server_start(&s, script, 3);
  stoke__http *h = client(3, 100);
  char url[128], err[512], buf[4];
  url_of(&s, url, sizeof url, "/x.stoke?sig=SECRET");
  assert_int_equal(stoke__http_get_range(h, url, 0, 4, buf, NULL, err,
                                         sizeof err), STOKE_EIO);
  char want[256];
  snprintf(want, sizeof want, "GET http://127.0.0.1:%d/x.stoke?... bytes "
           "0-3: HTTP 503: throttled after 3 attempts", s.port);
  assert_string_equal(err, want);
  assert_null(strstr(err, "SECRET"));
  stoke__http_destroy(h);
  server_stop(&s);
}

static void test_budget_is_shared(void **state) {
  (void)state;
  const char *script[] = {ANSWER_503, ANSWER_503, ANSWER_503};
  server s;
  server_start(&s, script, 3);
  stoke__http *h = client(10, 1);
  char url[128], err[512], buf[4];
  url_of(&s, url, sizeof url, "/x");
  /* One retry in the budget: the first request spends it; the second
  ** gets no retry at all. */
  assert_int_equal(stoke__http_get_range(h, url, 0, 4, buf, NULL, err,
                                         sizeof err), STOKE_EIO);
  assert_non_null(strstr(err, "after 2 attempts (the retry budget is "
                              "spent)"));
  assert_int_equal(stoke__http_get_range(h, url, 0, 4, buf, NULL, err,
                                         sizeof err), STOKE_EIO);
  assert_non_null(strstr(err, "after 1 attempt (the retry budget is "
                              "spent)"));
  stoke__http_destroy(h);
  server_stop(&s);
}

static void test_short_long_and_ignored(void **state) {
  (void)state;
  const char *script[] = {
      R206("0-3", "10", 4) "ab",             /* short: retried */
      R206("0-3", "10", 4) "abcd",           /* then whole */
      R206("0-3", "10", 8) "abcdefgh",       /* longer than asked */
      "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\n"
      "abcd",                                /* Range ignored */
      "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: "
      "close\r\n\r\n"};
  server s;
  server_start(&s, script, 5);
  stoke__http *h = client(3, 100);
  char url[128], err[512], buf[4];
  url_of(&s, url, sizeof url, "/x");
  assert_int_equal(stoke__http_get_range(h, url, 0, 4, buf, NULL, err,
                                         sizeof err), 0);
  assert_memory_equal(buf, "abcd", 4);
  assert_int_equal(stoke__http_get_range(h, url, 0, 4, buf, NULL, err,
                                         sizeof err), STOKE_EFORMAT);
  assert_non_null(strstr(err, "larger than allowed"));
  assert_int_equal(stoke__http_get_range(h, url, 0, 4, buf, NULL, err,
                                         sizeof err), STOKE_EFORMAT);
  assert_non_null(strstr(err, "ignored the Range request"));
  assert_int_equal(stoke__http_get_range(h, url, 0, 4, buf, NULL, err,
                                         sizeof err), STOKE_EIO);
  assert_non_null(strstr(err, "HTTP 404: error answer after 1 attempt"));
  /* The server counts an answer after writing it, so the client can have
  ** read the last one before it is counted (seen under load: 4 != 5):
  ** the count is final once the server's thread is joined. */
  stoke__http_destroy(h);
  server_stop(&s);
  assert_int_equal(atomic_load(&s.served), 5);
}

/* ---- s3:// through the same client ------------------------------------- */

#define XML_ANSWER(status, body)                                             \
  "HTTP/1.1 " status "\r\nContent-Type: application/xml\r\n"              \
  "Connection: close\r\n\r\n" body

static stoke__http *s3_client(const server *s, stoke__s3_conf *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->endpoint, sizeof c->endpoint, "http://127.0.0.1:%d", s->port);
  snprintf(c->region, sizeof c->region, "eu-west-1");
  snprintf(c->key_id, sizeof c->key_id, "AKIDUNIT");
  snprintf(c->secret, sizeof c->secret, "UnitS3cretValue");
  snprintf(c->token, sizeof c->token, "UnitT0kenValue");
  stoke__http_options o = {0};
  o.max_attempts = 3;
  o.backoff_ms = 1;
  o.stall_timeout_ms = 2000;
  o.connect_timeout_ms = 2000;
  o.s3 = c;
  stoke__http *h;
  char err[256];
  assert_int_equal(stoke__http_create(&o, NULL, &h, err, sizeof err), 0);
  return h;
}

static void test_s3_signed_error_code_not_retried(void **state) {
  (void)state;
  /* A 403 whose XML body is longer than the 64 bytes asked, with its
  ** Content-Length: its Code is read all the same (the answer is let in
  ** past the range's size), and a 403 is not retried. */
  const char *body =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>"
      "SignatureDoesNotMatch</Code><Message>The request signature we "
      "calculated does not match the signature you provided.</Message>"
      "<StringToSign>AWS4-HMAC-SHA256 ...</StringToSign></Error>";
  char answer[1024];
  snprintf(answer, sizeof answer, "HTTP/1.1 403 Forbidden\r\nContent-Type: "
           "application/xml\r\nContent-Length: %zu\r\nConnection: "
           "close\r\n\r\n%s", strlen(body), body);
  const char *script[] = {answer};
  server s;
  server_start(&s, script, 1);
  stoke__s3_conf c;
  stoke__http *h = s3_client(&s, &c);
  char err[512], buf[64];
  int rc = stoke__http_get_range(h, "s3://bkt/dir/a b.stoke", 0, sizeof buf,
                                 buf, NULL, err, sizeof err);
  assert_int_equal(rc, STOKE_EIO);
  assert_string_equal(err, "GET s3://bkt/dir/a b.stoke bytes 0-63: HTTP 403: "
                           "SignatureDoesNotMatch after 1 attempt");
  server_stop(&s); /* joined: its count and last request are final */
  assert_int_equal(atomic_load(&s.served), 1);
  /* Path-style, the key encoded, signed by libcurl with the payload hash
  ** and the token; the secret itself never on the wire. */
  const char *r = s.last_request;
  assert_non_null(strstr(r, "GET /bkt/dir/a%20b.stoke HTTP/1.1"));
  assert_non_null(strstr(r, "Authorization: AWS4-HMAC-SHA256 Credential="
                            "AKIDUNIT/"));
  assert_non_null(strstr(r, "/eu-west-1/s3/aws4_request"));
  assert_non_null(strstr(r, "x-amz-content-sha256: e3b0c442"));
  assert_non_null(strstr(r, "x-amz-security-token: UnitT0kenValue"));
  assert_non_null(strstr(r, "Range: bytes=0-63"));
  assert_null(strstr(r, "UnitS3cretValue"));
  assert_null(strstr(err, "UnitS3cretValue"));
  assert_null(strstr(err, "127.0.0.1"));
  stoke__http_destroy(h);
}

/* A wrong region's answer naming the bucket's region only in its XML
** body (no x-amz-bucket-region header): 301 PermanentRedirect naming only
** its <Endpoint> (the region read from the AWS host), then 400
** AuthorizationHeaderMalformed with a <Region>; each followed once, signed
** for the region the body names, and the bucket's next request goes
** there at once. */
static void test_s3_region_in_body(void **state) {
  (void)state;
  static const char moved[] =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>"
      "PermanentRedirect</Code><Message>The bucket you are attempting to "
      "access must be addressed using the specified endpoint.</Message>"
      "<Bucket>bkt</Bucket><Endpoint>bkt.s3.sa-east-1.amazonaws.com"
      "</Endpoint><RequestId>4442587F</RequestId></Error>";
  static const char malformed[] =
      "<Error><Code>AuthorizationHeaderMalformed</Code><Message>the region "
      "'eu-west-1' is wrong; expecting 'ap-south-1'</Message><Region>"
      "ap-south-1</Region></Error>";
  char a301[1024], a400[1024];
  snprintf(a301, sizeof a301, "HTTP/1.1 301 Moved Permanently\r\n"
           "Content-Type: application/xml\r\nContent-Length: %zu\r\n"
           "Connection: close\r\n\r\n%s", strlen(moved), moved);
  snprintf(a400, sizeof a400, "HTTP/1.1 400 Bad Request\r\n"
           "Content-Type: application/xml\r\nContent-Length: %zu\r\n"
           "Connection: close\r\n\r\n%s", strlen(malformed), malformed);
  const char *script[] = {a301, R206("0-3", "10", 4) "abcd",
                          R206("4-7", "10", 4) "efgh", a400,
                          R206("0-3", "10", 4) "wxyz"};
  server s;
  server_start(&s, script, 5);
  stoke__s3_conf c;
  stoke__http *h = s3_client(&s, &c);
  char err[512], buf[4];
  assert_int_equal(stoke__http_get_range(h, "s3://bkt/a.stoke", 0, 4, buf,
                                         NULL, err, sizeof err), 0);
  assert_memory_equal(buf, "abcd", 4);
  assert_non_null(strstr(s.last_request, "/sa-east-1/s3/aws4_request"));
  /* The bucket's next request: there first, no second 301. */
  assert_int_equal(stoke__http_get_range(h, "s3://bkt/b.stoke", 4, 4, buf,
                                         NULL, err, sizeof err), 0);
  assert_memory_equal(buf, "efgh", 4);
  assert_non_null(strstr(s.last_request, "/sa-east-1/s3/aws4_request"));
  /* Another bucket is asked in the settings' region, and follows its own
  ** answer's body. */
  assert_int_equal(stoke__http_get_range(h, "s3://other/a.stoke", 0, 4, buf,
                                         NULL, err, sizeof err), 0);
  assert_memory_equal(buf, "wxyz", 4);
  assert_non_null(strstr(s.last_request, "/ap-south-1/s3/aws4_request"));
  stoke__http_counts n;
  stoke__http_counts_get(h, &n);
  assert_int_equal(n.retries, 0); /* a redirect is not a retry */
  stoke__http_destroy(h);
  server_stop(&s);
  assert_int_equal(atomic_load(&s.served), 5);
}

/* A wrong region's answer whose body names no region, or one that is no
** region name, is the error it is: not followed. */
static void test_s3_region_in_body_refused(void **state) {
  (void)state;
  static const char bad[] =
      "<Error><Code>PermanentRedirect</Code><Region>evil.example.com/x"
      "</Region></Error>";
  char a301[512];
  snprintf(a301, sizeof a301, "HTTP/1.1 301 Moved Permanently\r\n"
           "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
           strlen(bad), bad);
  const char *script[] = {a301};
  server s;
  server_start(&s, script, 1);
  stoke__s3_conf c;
  stoke__http *h = s3_client(&s, &c);
  char err[512], buf[4];
  assert_int_equal(stoke__http_get_range(h, "s3://bkt/a.stoke", 0, 4, buf,
                                         NULL, err, sizeof err), STOKE_EIO);
  assert_string_equal(err, "GET s3://bkt/a.stoke bytes 0-3: HTTP 301: "
                           "PermanentRedirect after 1 attempt");
  assert_null(strstr(err, "evil"));
  stoke__http_destroy(h);
  server_stop(&s);
  assert_int_equal(atomic_load(&s.served), 1);
}

static void test_s3_listing_hostile(void **state) {
  (void)state;
  /* The same continuation token twice: refused, not listed forever. */
  const char *loop[] = {
      XML_ANSWER("200 OK", "<ListBucketResult><IsTruncated>true</IsTruncated>"
                           "<NextContinuationToken>T</NextContinuationToken>"
                           "<Contents><Key>p/a.stoke</Key></Contents>"
                           "</ListBucketResult>"),
      XML_ANSWER("200 OK", "<ListBucketResult><IsTruncated>true</IsTruncated>"
                           "<NextContinuationToken>T</NextContinuationToken>"
                           "<Contents><Key>p/b.stoke</Key></Contents>"
                           "</ListBucketResult>")};
  server s;
  server_start(&s, loop, 2);
  stoke__s3_conf c;
  stoke__http *h = s3_client(&s, &c);
  char err[512], **keys;
  size_t n;
  int kind;
  int rc = stoke__s3_list(h, "s3://bkt/p/", NULL, &keys, &n, &kind, err,
                          sizeof err);
  assert_int_equal(rc, STOKE_EFORMAT);
  assert_non_null(strstr(err, "listing s3://bkt/p/: the server gave the "
                              "same continuation token twice"));
  assert_non_null(strstr(s.last_request, "GET /bkt/?continuation-token=T&"
                                         "list-type=2&prefix=p%2F "));
  stoke__http_destroy(h);
  server_stop(&s);
  /* Two pages, keys out of order and of both kinds: sorted, then refused
  ** as a mix; a README is no shard. */
  const char *mixed[] = {
      XML_ANSWER("200 OK", "<ListBucketResult><IsTruncated>true</IsTruncated>"
                           "<NextContinuationToken>A+/=</NextContinuationToken>"
                           "<Contents><Key>p/b.stoke</Key></Contents>"
                           "<Contents><Key>p/README</Key></Contents>"
                           "</ListBucketResult>"),
      XML_ANSWER("200 OK", "<ListBucketResult><IsTruncated>false"
                           "</IsTruncated><Contents><Key>p/a.stoke</Key>"
                           "</Contents></ListBucketResult>"),
      XML_ANSWER("200 OK", "<ListBucketResult><IsTruncated>false"
                           "</IsTruncated><Contents><Key>p/a.stoke</Key>"
                           "</Contents><Contents><Key>p/c.tar</Key>"
                           "</Contents></ListBucketResult>")};
  server_start(&s, mixed, 3);
  h = s3_client(&s, &c);
  rc = stoke__s3_list(h, "s3://bkt/p/", NULL, &keys, &n, &kind, err,
                      sizeof err);
  assert_int_equal(rc, 0);
  assert_int_equal(n, 2);
  assert_string_equal(keys[0], "s3://bkt/p/a.stoke");
  assert_string_equal(keys[1], "s3://bkt/p/b.stoke");
  assert_int_equal(kind, STOKE_IMAGES_PACKED);
  assert_non_null(strstr(s.last_request, "continuation-token=A%2B%2F%3D&"));
  free(keys);
  rc = stoke__s3_list(h, "s3://bkt/p/", NULL, &keys, &n, &kind, err,
                      sizeof err);
  assert_int_equal(rc, STOKE_EINVAL);
  assert_non_null(strstr(err, "s3://bkt/p/ holds both packed (.stoke) and "
                              "tar (.tar) shards"));
  stoke__http_destroy(h);
  server_stop(&s);
}

static void test_hostile_object_size(void **state) {
  (void)state;
  /* A header answer that claims a 4 PiB object: refused before any
  ** mapping or further request. */
  static char head[STOKE__PACK_HEADER];
  static char answer[512];
  memset(head, 'x', sizeof head);
  int n = snprintf(answer, sizeof answer,
                   R206("0-63", "4503599627370496", 64));
  memcpy(answer + n, head, sizeof head);
  answer[n + sizeof head] = 0;
  const char *script[] = {answer};
  server s;
  server_start(&s, script, 1);
  stoke__http *h = client(1, 1);
  char url[128], err[512];
  url_of(&s, url, sizeof url, "/big.stoke");
  uint8_t *map;
  size_t len;
  assert_int_equal(stoke__packed_remote_map(h, stoke__sys_or_real(NULL), url,
                                            "big.stoke", &map, &len, err,
                                            sizeof err), STOKE_EFORMAT);
  assert_non_null(strstr(err, "more than a shard may be"));
  assert_null(map);
  stoke__http_destroy(h);
  server_stop(&s);
}

static atomic_int parallel_calls;

static int count_call(size_t i, void *arg, char *e, size_t ecap) {
  (void)arg;
  atomic_fetch_add(&parallel_calls, 1);
  if (i != 5) return 0;
  snprintf(e, ecap, "call %zu failed", i);
  return STOKE_EIO;
}

static void test_parallel(void **state) {
  (void)state;
  stoke__http *h = client(1, 1);
  atomic_store(&parallel_calls, 0);
  char err[128] = "";
  assert_int_equal(stoke__http_parallel(h, 0, count_call, NULL, err,
                                        sizeof err), 0);
  assert_int_equal(atomic_load(&parallel_calls), 0);
  assert_int_equal(stoke__http_parallel(h, 5, count_call, NULL, err,
                                        sizeof err), 0);
  assert_int_equal(atomic_load(&parallel_calls), 5);
  assert_string_equal(err, "");
  atomic_store(&parallel_calls, 0);
  assert_int_equal(stoke__http_parallel(h, 1000, count_call, NULL, err,
                                        sizeof err),
                   STOKE_EIO);
  /* The failing call's message is the one kept. */
  assert_string_equal(err, "call 5 failed");
  /* Stopped early: at most the calls already started run past the error. */
  assert_true(atomic_load(&parallel_calls) < 1000);
  stoke__http_destroy(h);
}

/* A 206 answer for [lo, lo + n) of an object of total bytes, each byte c. */
static char *answer_of(uint64_t lo, size_t n, uint64_t total, char c) {
  char head[256];
  int h = snprintf(head, sizeof head,
                   "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes "
                   "%llu-%llu/%llu\r\nContent-Length: %zu\r\nConnection: "
                   "close\r\n\r\n", (unsigned long long)lo,
                   (unsigned long long)(lo + n - 1),
                   (unsigned long long)total, n);
  char *a = malloc((size_t)h + n + 1);
  assert_non_null(a);
  memcpy(a, head, (size_t)h);
  memset(a + h, c, n);
  a[(size_t)h + n] = 0;
  return a;
}

/* The tar index's window: the probe's block, a refill that follows it
** asks for twice the window, a read inside is no request, one past a
** gap of more than a window (a large member skipped) asks from there for
** the smallest window and fetches nothing of the gap, one past a small
** gap (the rest of a small member) for twice as much, and a read past the
** object's end is refused without one. */
static void test_tar_window(void **state) {
  (void)state;
  const uint64_t total = 10u << 20;
  const size_t grown = 2 * STOKE__TAR_WINDOW_MIN;
  const uint64_t near = (8u << 20) + STOKE__TAR_WINDOW_MIN + 1000; /* 1000
                                                    bytes skipped */
  char *a[4] = {answer_of(0, 512, total, 'a'),
                answer_of(512, grown, total, 'b'),
                answer_of(8u << 20, STOKE__TAR_WINDOW_MIN, total, 'c'),
                answer_of(near, grown, total, 'd')};
  const char *script[4] = {a[0], a[1], a[2], a[3]};
  server s;
  server_start(&s, script, 4);
  stoke__http *h = client(1, 0);
  char url[128], err[512];
  url_of(&s, url, sizeof url, "/shard.tar");
  stoke__tar_window w;
  assert_int_equal(stoke__tar_window_open(&w, h, url, NULL, err, sizeof err),
                   0);
  assert_int_equal(w.total, total);
  char buf[512];
  assert_int_equal(stoke__tar_window_read(&w, buf, 100, 10, err, sizeof err),
                   0);
  assert_int_equal(buf[99], 'a');
  assert_int_equal(atomic_load(&s.served), 1);
  assert_int_equal(stoke__tar_window_read(&w, buf, 512, 512, err, sizeof err),
                   0);
  assert_int_equal(buf[0], 'b');
  char want[64];
  snprintf(want, sizeof want, "Range: bytes=512-%zu", 512 + grown - 1);
  assert_non_null(strstr(s.last_request, want));
  assert_int_equal(stoke__tar_window_read(&w, buf, 512, 100000, err,
                                          sizeof err), 0);
  assert_int_equal(atomic_load(&s.served), 2); /* inside: no request */
  assert_int_equal(stoke__tar_window_read(&w, buf, 512, 8u << 20, err,
                                          sizeof err), 0);
  assert_int_equal(buf[511], 'c');
  snprintf(want, sizeof want, "Range: bytes=%u-%zu", 8u << 20,
           (size_t)(8u << 20) + STOKE__TAR_WINDOW_MIN - 1);
  assert_non_null(strstr(s.last_request, want));
  assert_int_equal(w.fetched, 512 + grown + STOKE__TAR_WINDOW_MIN); /* none
                                                          of the gap */
  assert_int_equal(stoke__tar_window_read(&w, buf, 512, near, err,
                                          sizeof err), 0);
  assert_int_equal(buf[0], 'd');
  snprintf(want, sizeof want, "Range: bytes=%llu-%llu",
           (unsigned long long)near,
           (unsigned long long)(near + grown - 1));
  assert_non_null(strstr(s.last_request, want));
  assert_int_equal(stoke__tar_window_read(&w, buf, 512, total - 100, err,
                                          sizeof err), STOKE_EFORMAT);
  assert_non_null(strstr(err, "past the end"));
  assert_int_equal(atomic_load(&s.served), 4);
  stoke__tar_window_close(&w);
  stoke__http_destroy(h);
  server_stop(&s);
  for (int k = 0; k < 4; k++) free(a[k]);
}

/* A server that answers the probe with the whole object (no Range): the
** window says STOKE_EFORMAT, the tar kind's cue to spool the shard. */
static void test_tar_window_no_range(void **state) {
  (void)state;
  const char *script[] = {"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n"
                          "Connection: close\r\n\r\nabcd"};
  server s;
  server_start(&s, script, 1);
  stoke__http *h = client(1, 0);
  char url[128], err[512];
  url_of(&s, url, sizeof url, "/shard.tar");
  stoke__tar_window w;
  assert_int_equal(stoke__tar_window_open(&w, h, url, NULL, err, sizeof err),
                   STOKE_EFORMAT);
  assert_null(w.buf);
  assert_null(strstr(err, "SECRET"));
  stoke__http_destroy(h);
  server_stop(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_url_shown),
      cmocka_unit_test(test_url_secret_and_scheme),
      cmocka_unit_test(test_url_patterns),
      cmocka_unit_test(test_retries_then_range),
      cmocka_unit_test(test_gives_up_naming_url_status_attempts),
      cmocka_unit_test(test_budget_is_shared),
      cmocka_unit_test(test_short_long_and_ignored),
      cmocka_unit_test(test_hostile_object_size),
      cmocka_unit_test(test_s3_signed_error_code_not_retried),
      cmocka_unit_test(test_s3_region_in_body),
      cmocka_unit_test(test_s3_region_in_body_refused),
      cmocka_unit_test(test_s3_listing_hostile),
      cmocka_unit_test(test_parallel),
      cmocka_unit_test(test_tar_window),
      cmocka_unit_test(test_tar_window_no_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
