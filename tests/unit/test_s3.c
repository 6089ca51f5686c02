/* test_s3.c — s3:// specs without a server: the AWS_* settings and the
** shared files' profiles (src/storage/s3_conf.c), the mapping to
** path-style and virtual-hosted URLs, what is a prefix, and the strict XML
** reader on S3's answers, crafted ones and junk (src/storage/s3.c; the
** listing against a real server is tests/cli/t1002-s3.sh). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/s3.h"
#include "storage/url.h"

static void clear_env(void) {
  static const char *const names[] = {
      "AWS_ENDPOINT_URL",      "AWS_REGION",        "AWS_DEFAULT_REGION",
      "AWS_ACCESS_KEY_ID",     "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
      "STOKE_TEST_S3_MAX_KEYS", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
      "AWS_DEFAULT_PROFILE"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    unsetenv(names[k]);
  /* Never the files of whoever runs the tests. */
  setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/stoke/credentials", 1);
  setenv("AWS_CONFIG_FILE", "/nonexistent/stoke/config", 1);
}

static void test_settings(void **state) {
  (void)state;
  stoke__s3_conf c;
  char err[256];
  clear_env();
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), 0);
  assert_string_equal(c.region, "us-east-1");
  assert_string_equal(c.endpoint, "");
  assert_string_equal(c.key_id, "");
  setenv("AWS_DEFAULT_REGION", "eu-west-3", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), 0);
  assert_string_equal(c.region, "eu-west-3");
  setenv("AWS_REGION", "ap-south-1", 1); /* AWS_REGION first */
  setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000//", 1);
  setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "TopSecretValue", 1);
  setenv("AWS_SESSION_TOKEN", "TokenValue", 1);
  setenv("STOKE_TEST_S3_MAX_KEYS", "2", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), 0);
  assert_string_equal(c.region, "ap-south-1");
  assert_string_equal(c.endpoint, "http://127.0.0.1:9000");
  assert_string_equal(c.secret, "TopSecretValue");
  assert_string_equal(c.token, "TokenValue");
  assert_int_equal(c.max_keys, 2);
  /* Half the credentials, a bad region, a bad knob: refused, and the
  ** message never holds a value (it may be a secret). */
  unsetenv("AWS_ACCESS_KEY_ID");
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EINVAL);
  assert_non_null(strstr(err, "come together"));
  assert_null(strstr(err, "TopSecretValue"));
  setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
  setenv("AWS_REGION", "eu west", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EINVAL);
  setenv("AWS_REGION", "us-east-2", 1);
  setenv("STOKE_TEST_S3_MAX_KEYS", "0", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EINVAL);
  unsetenv("STOKE_TEST_S3_MAX_KEYS");
  char big[5000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  setenv("AWS_SESSION_TOKEN", big, 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EINVAL);
  assert_non_null(strstr(err, "AWS_SESSION_TOKEN is longer"));
  assert_null(strstr(err, "xxxx"));
  setenv("AWS_SESSION_TOKEN", "t", 1);
  setenv("AWS_ENDPOINT_URL", "ftp://host", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EINVAL);
  /* An s3:// endpoint is remote but not what libcurl is given: refused
  ** (it passed while the check was stoke__url_is_remote). */
  setenv("AWS_ENDPOINT_URL", "s3://bucket", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EINVAL);
  assert_non_null(strstr(err, "must be an http://"));
  /* The service's own variable comes first. */
  setenv("AWS_ENDPOINT_URL", "http://generic:1", 1);
  setenv("AWS_ENDPOINT_URL_S3", "http://for-s3:2", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), 0);
  assert_string_equal(c.endpoint, "http://for-s3:2");
  clear_env();
}

static char tmpdir[64];

static void write_text(const char *name, const char *text, char *path,
                       size_t cap) {
  snprintf(path, cap, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static const char CREDENTIALS[] =
    "# a comment\n"
    "[default]\n"
    "aws_access_key_id = DEFAULTKEY\n"
    "aws_secret_access_key=DefaultSecret\n"
    "\n"
    "[work]\n"
    "  ; indented: skipped\n"
    "aws_access_key_id = WORKKEY\n"
    "aws_secret_access_key = Work#Secret=x\n"
    "aws_session_token = WorkToken\n"
    "region = us-west-2\n" /* config's profile comes first */
    "[half]\n"
    "aws_access_key_id = HALFKEY\n";

static const char CONFIG[] =
    "[default]\n"
    "region = eu-north-1\n"
    "[profile work]\n"
    "region = ap-east-1\n"
    "endpoint_url = http://127.0.0.1:9000/\n"
    "s3 =\n"
    "  addressing_style = path\n"
    "[profile cfgkeys]\n"
    "aws_access_key_id = CFGKEY\n"
    "aws_secret_access_key = CfgSecret\n"
    "[profile role]\n"
    "role_arn = arn:aws:iam::123:role/r\n"
    "source_profile = default\n"
    "[work]\n"
    "region = us-west-1\n";

static void test_profiles(void **state) {
  (void)state;
  stoke__s3_conf c;
  char err[512], cred[128], conf[128];
  snprintf(tmpdir, sizeof tmpdir, "/tmp/stoke-test-s3-XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
  clear_env();
  write_text("credentials", CREDENTIALS, cred, sizeof cred);
  write_text("config", CONFIG, conf, sizeof conf);
  setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
  setenv("AWS_CONFIG_FILE", conf, 1);

  /* The default profile: keys from credentials, region from config. */
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), 0);
  assert_string_equal(c.key_id, "DEFAULTKEY");
  assert_string_equal(c.secret, "DefaultSecret");
  assert_string_equal(c.token, "");
  assert_string_equal(c.region, "eu-north-1");
  assert_string_equal(c.endpoint, "");

  /* A named one: "[profile work]" in config (not "[work]"); the value
  ** keeps its '#' and '='; the nested s3 block is skipped; the
  ** endpoint_url is trimmed of its '/'. */
  setenv("AWS_PROFILE", "work", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), 0);
  assert_string_equal(c.key_id, "WORKKEY");
  assert_string_equal(c.secret, "Work#Secret=x");
  assert_string_equal(c.token, "WorkToken");
  assert_string_equal(c.region, "ap-east-1");
  assert_string_equal(c.endpoint, "http://127.0.0.1:9000");

  /* The environment comes first, for each setting, and its key pair
  ** whole: no token from the profile beside the environment's keys. */
  setenv("AWS_REGION", "sa-east-1", 1);
  setenv("AWS_ENDPOINT_URL", "http://10.0.0.5:9000", 1);
  setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "EnvSecret", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), 0);
  assert_string_equal(c.key_id, "ENVKEY");
  assert_string_equal(c.token, "");
  assert_string_equal(c.region, "sa-east-1");
  assert_string_equal(c.endpoint, "http://10.0.0.5:9000");
  unsetenv("AWS_REGION");
  unsetenv("AWS_ENDPOINT_URL");
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");

  /* AWS_DEFAULT_PROFILE when AWS_PROFILE is unset; keys in config. */
  unsetenv("AWS_PROFILE");
  setenv("AWS_DEFAULT_PROFILE", "cfgkeys", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), 0);
  assert_string_equal(c.key_id, "CFGKEY");
  assert_string_equal(c.region, "us-east-1");
  unsetenv("AWS_DEFAULT_PROFILE");

  /* Refused, never naming a value: a missing profile, half a pair, a
  ** role stoke does not assume, a broken line. */
  setenv("AWS_PROFILE", "nosuch", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EINVAL);
  assert_non_null(strstr(err, "\"nosuch\" (AWS_PROFILE) is in neither"));
  setenv("AWS_PROFILE", "half", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EINVAL);
  assert_non_null(strstr(err, "aws_access_key_id without "
                              "aws_secret_access_key"));
  assert_null(strstr(err, "HALFKEY"));
  setenv("AWS_PROFILE", "role", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EINVAL);
  assert_non_null(strstr(err, "from role_arn"));
  setenv("AWS_PROFILE", "work", 1);
  write_text("credentials", "[work]\naws_secret_access_key BrokenSecret\n",
             cred, sizeof cred);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EFORMAT);
  assert_non_null(strstr(err, "credentials line 2"));
  assert_null(strstr(err, "BrokenSecret"));
  write_text("credentials", "[work\n", cred, sizeof cred);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), STOKE_EFORMAT);
  assert_non_null(strstr(err, "line 1: a section header"));

  /* No files at all: unsigned requests, the default region (a missing
  ** default profile is no error). */
  unsetenv("AWS_PROFILE");
  unlink(cred);
  unlink(conf);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), 0);
  assert_string_equal(c.key_id, "");
  assert_string_equal(c.region, "us-east-1");
  /* "~/" is the home folder. */
  char home_aws[128];
  snprintf(home_aws, sizeof home_aws, "%s/.aws", tmpdir);
  assert_int_equal(mkdir(home_aws, 0700), 0);
  char path[160];
  snprintf(path, sizeof path, "%s/.aws/creds", tmpdir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("[default]\naws_access_key_id=HOMEKEY\naws_secret_access_key=s\n", f);
  fclose(f);
  char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  setenv("HOME", tmpdir, 1);
  setenv("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/creds", 1);
  assert_int_equal(stoke__s3_conf_read(&c, err, sizeof err), 0);
  assert_string_equal(c.key_id, "HOMEKEY");
  if (old_home) {
    setenv("HOME", old_home, 1);
    free(old_home);
  } else {
    unsetenv("HOME");
  }
  unlink(path);
  rmdir(home_aws);
  rmdir(tmpdir);
  clear_env();
}

static void mapped(const stoke__s3_conf *c, const char *url,
                   const char *want) {
  char buf[512], err[256];
  assert_int_equal(stoke__s3_http_url(c, url, buf, sizeof buf, err,
                                      sizeof err), 0);
  assert_string_equal(buf, want);
}

static void test_urls(void **state) {
  (void)state;
  stoke__s3_conf c;
  memset(&c, 0, sizeof c);
  snprintf(c.region, sizeof c.region, "eu-west-1");
  /* Virtual-hosted without an endpoint; the key encoded as SigV4 signs
  ** it ('/' kept, a space and '+' not). */
  mapped(&c, "s3://my-bucket/train/a b+c.stoke",
         "https://my-bucket.s3.eu-west-1.amazonaws.com/train/a%20b%2Bc.stoke");
  mapped(&c, "s3://my-bucket/?list-type=2&prefix=x",
         "https://my-bucket.s3.eu-west-1.amazonaws.com/?list-type=2&prefix=x");
  snprintf(c.endpoint, sizeof c.endpoint, "http://127.0.0.1:9000");
  mapped(&c, "s3://bkt/k/0.tar", "http://127.0.0.1:9000/bkt/k/0.tar");
  mapped(&c, "S3://bkt/~x_y-z.stoke", "http://127.0.0.1:9000/bkt/~x_y-z.stoke");
  char buf[64], err[256];
  assert_int_equal(stoke__s3_http_url(&c, "s3:///key", buf, sizeof buf, err,
                                      sizeof err), STOKE_EINVAL);
  assert_int_equal(stoke__s3_http_url(&c, "s3://Bad_Bucket/k", buf,
                                      sizeof buf, err, sizeof err),
                   STOKE_EINVAL);
  assert_int_equal(stoke__s3_http_url(&c, "s3://b/a-key-far-too-long-for-"
                                      "a-buffer-of-64-bytes.stoke", buf,
                                      sizeof buf, err, sizeof err),
                   STOKE_EINVAL);
  /* Remote, shown as written (an s3:// URL holds no secret). */
  assert_true(stoke__url_is_remote("s3://b/k.stoke"));
  assert_true(stoke__url_is_s3("S3://b/k.stoke"));
  assert_false(stoke__url_is_s3("s3:/b"));
  char shown[64];
  stoke__url_redact("s3://b/train-0.stoke", shown, sizeof shown);
  assert_string_equal(shown, "s3://b/train-0.stoke");
  /* Prefixes: ending in '/' or in neither kind. */
  assert_true(stoke__s3_is_prefix("s3://b/"));
  assert_true(stoke__s3_is_prefix("s3://b/train"));
  assert_true(stoke__s3_is_prefix("s3://b/x.stoke/"));
  assert_false(stoke__s3_is_prefix("s3://b/train-0.stoke"));
  assert_false(stoke__s3_is_prefix("s3://b/train-{0..3}.tar"));
  assert_false(stoke__s3_is_prefix("s3://b/t-{a,b.tar}"));
}

/* A bucket S3 said lives elsewhere: its URL in that region, the bucket of
** a URL, and what may serve as a region (an answer's header). */
static void test_other_region(void **state) {
  (void)state;
  stoke__s3_conf c;
  memset(&c, 0, sizeof c);
  snprintf(c.region, sizeof c.region, "us-east-1");
  char buf[512], err[256], b[64];
  assert_int_equal(stoke__s3_http_url_in(&c, "eu-west-3", "s3://bk/a/b.stoke",
                                         buf, sizeof buf, err, sizeof err),
                   0);
  assert_string_equal(buf, "https://bk.s3.eu-west-3.amazonaws.com/a/b.stoke");
  snprintf(c.endpoint, sizeof c.endpoint, "http://127.0.0.1:9000");
  assert_int_equal(stoke__s3_http_url_in(&c, "eu-west-3", "s3://bk/a", buf,
                                         sizeof buf, err, sizeof err), 0);
  assert_string_equal(buf, "http://127.0.0.1:9000/bk/a"); /* path-style */
  stoke__s3_bucket_of("s3://my-bucket/x/y?z", b);
  assert_string_equal(b, "my-bucket");
  stoke__s3_bucket_of("s3:///x", b);
  assert_string_equal(b, "");
  stoke__s3_bucket_of("https://h/x", b);
  assert_string_equal(b, "");
  assert_true(stoke__s3_region_ok("ap-southeast-2"));
  assert_false(stoke__s3_region_ok(""));
  assert_false(stoke__s3_region_ok("evil.example.com/"));
  assert_false(stoke__s3_region_ok("EU-WEST-1"));
}

static void test_list_url(void **state) {
  (void)state;
  char buf[256];
  /* Names sorted, values encoded ('/' too): the canonical query SigV4
  ** signs, which libcurl 7.x signs as written. */
  assert_true(stoke__s3_list_url("b", 1, "train/a b", 9, NULL, 0, buf,
                                 sizeof buf));
  assert_string_equal(buf, "s3://b/?list-type=2&prefix=train%2Fa%20b");
  assert_true(stoke__s3_list_url("b", 1, "p/", 2, "1x+/=", 2, buf,
                                 sizeof buf));
  assert_string_equal(buf, "s3://b/?continuation-token=1x%2B%2F%3D&"
                           "list-type=2&max-keys=2&prefix=p%2F");
  assert_true(stoke__s3_list_url("b", 1, "", 0, "", 0, buf, sizeof buf));
  assert_string_equal(buf, "s3://b/?list-type=2&prefix=");
  assert_false(stoke__s3_list_url("b", 1, "p", 1, "a-long-token", 0, buf,
                                  24));
}

typedef struct keys {
  char got[8][128];
  int n;
} keys;

static int on_key(const char *key, void *arg) {
  keys *k = arg;
  if (k->n >= 8) return STOKE_EINVAL;
  snprintf(k->got[k->n++], sizeof k->got[0], "%s", key);
  return 0;
}

static int parse(const char *xml, keys *k, bool *truncated, char *token,
                 char *err, size_t cap) {
  memset(k, 0, sizeof *k);
  return stoke__s3_parse_list(xml, strlen(xml), on_key, k, truncated, token,
                              256, err, cap);
}

static void test_listing_xml(void **state) {
  (void)state;
  keys k;
  bool tr;
  char token[256], err[256];
  /* S3's own shape: prolog, namespace, entities, keys in Contents only
  ** (a Key elsewhere, in CommonPrefixes, is not a key of the listing). */
  const char *page =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount>"
      "<MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>"
      "<NextContinuationToken>1ab+/=&amp;</NextContinuationToken>"
      "<Contents><Key>p/a&amp;b &lt;1&gt;.stoke</Key>"
      "<ETag>&quot;6f59&quot;</ETag><Size>12</Size></Contents>"
      "<!-- a comment -->"
      "<Contents><Key>p/caf&#233;&#x2F;&apos;.tar</Key><Owner/></Contents>"
      "<CommonPrefixes><Prefix>p/sub/</Prefix></CommonPrefixes>"
      "</ListBucketResult>\n";
  assert_int_equal(parse(page, &k, &tr, token, err, sizeof err), 0);
  assert_int_equal(k.n, 2);
  assert_string_equal(k.got[0], "p/a&b <1>.stoke");
  assert_string_equal(k.got[1], "p/caf\xc3\xa9/'.tar");
  assert_true(tr);
  assert_string_equal(token, "1ab+/=&");
  /* The last page. */
  assert_int_equal(parse("<ListBucketResult><IsTruncated>false</IsTruncated>"
                         "</ListBucketResult>", &k, &tr, token, err,
                         sizeof err), 0);
  assert_false(tr);
  assert_int_equal(k.n, 0);
  /* Junk and hostile answers: each refused, none read past its end. */
  static const char *const bad[] = {
      "",
      "not xml at all",
      "<ListBucketResult><Contents><Key>a.stoke</Key></Contents>",
      "<ListBucketResult><Contents><Key>a.stoke</Contents></Key>"
      "</ListBucketResult>",
      "<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>",
      "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
      "<ListBucketResult><Contents><Key>&bogus;</Key></Contents>"
      "</ListBucketResult>",
      "<ListBucketResult><Contents><Key>&#0;</Key></Contents>"
      "</ListBucketResult>",
      "<ListBucketResult><Contents><Key>&#xD800;</Key></Contents>"
      "</ListBucketResult>",
      "<ListBucketResult><Contents><Key>&amp</Key></Contents>"
      "</ListBucketResult>",
      "<ListBucketResult><Contents><Key></Key></Contents>"
      "</ListBucketResult>",
      "<!DOCTYPE x [<!ENTITY e \"boom\">]><ListBucketResult/>",
      /* Each alone, in a document otherwise clean. */
      "<!DOCTYPE ListBucketResult><ListBucketResult/>",
      "<ListBucketResult><Contents><Key>a<![CDATA[b]]>.stoke</Key>"
      "</Contents></ListBucketResult>",
      "<ListBucketResult><Contents><Key><![CDATA[a.stoke]]></Key>"
      "</Contents></ListBucketResult>",
      "<ListBucketResult></ListBucketResult><ListBucketResult>"
      "</ListBucketResult>",
      "<ListBucketResult>junk</ListBucketResult>trailing",
      "<ListBucketResult x=\"<\"></ListBucketResult>",
      "<ListBucketResult><Contents><Key>a.stoke</Key></Contents",
      "<Error><Code>AccessDenied</Code></Error>",
      "<ListBucketResult><a><b><c><d><e><f><g><h>x</h></g></f></e></d>"
      "</c></b></a></ListBucketResult>",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    int rc = parse(bad[i], &k, &tr, token, err, sizeof err);
    if (rc != STOKE_EFORMAT) fail_msg("accepted (%d): %s", rc, bad[i]);
    assert_true(err[0] != 0);
  }
  /* A text longer than the bound is refused, not grown into. */
  size_t n = 10000;
  char *huge = malloc(n + 100);
  assert_non_null(huge);
  strcpy(huge, "<ListBucketResult><Contents><Key>");
  size_t w = strlen(huge);
  memset(huge + w, 'k', n);
  strcpy(huge + w + n, "</Key></Contents></ListBucketResult>");
  assert_int_equal(parse(huge, &k, &tr, token, err, sizeof err),
                   STOKE_EFORMAT);
  assert_non_null(strstr(err, "longer than"));
  /* A name longer than the bound too. */
  memset(huge, 0, n + 100);
  huge[0] = '<';
  memset(huge + 1, 'N', 200);
  strcat(huge, "/>");
  assert_int_equal(parse(huge, &k, &tr, token, err, sizeof err),
                   STOKE_EFORMAT);
  free(huge);
  /* Not NUL-terminated: only n bytes are read. */
  const char cut[] = "<ListBucketResult></ListBucketResult>GARBAGE";
  memset(&k, 0, sizeof k);
  assert_int_equal(stoke__s3_parse_list(cut, strlen(cut) - 7, on_key, &k,
                                        &tr, token, 256, err, sizeof err),
                   0);
}

static void test_error_code(void **state) {
  (void)state;
  char code[64];
  const char *e = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>"
                  "SignatureDoesNotMatch</Code><Message>The request "
                  "signature we calculated does not match</Message>"
                  "<StringToSign>AWS4-HMAC-SHA256...</StringToSign></Error>";
  assert_true(stoke__s3_error_code(e, strlen(e), code, sizeof code));
  assert_string_equal(code, "SignatureDoesNotMatch");
  /* Cut off after its Code (the client keeps a body's start only). */
  assert_true(stoke__s3_error_code(e, 80, code, sizeof code));
  assert_string_equal(code, "SignatureDoesNotMatch");
  const char *nginx = "<html><body>404 Not Found</body></html>";
  assert_false(stoke__s3_error_code(nginx, strlen(nginx), code, sizeof code));
  assert_string_equal(code, "");
  /* A Code that is not a word is the server's text: not shown. */
  const char *odd = "<Error><Code>x y; rm</Code></Error>";
  assert_false(stoke__s3_error_code(odd, strlen(odd), code, sizeof code));
  const char *nested = "<Error><Code><b>NoSuchKey</b></Code></Error>";
  assert_false(stoke__s3_error_code(nested, strlen(nested), code,
                                    sizeof code));
  assert_false(stoke__s3_error_code("", 0, code, sizeof code));
}

/* The region a wrong-region answer names in its body only (S3's 400
** AuthorizationHeaderMalformed, 301 PermanentRedirect without the
** x-amz-bucket-region header). */
static void test_error_region(void **state) {
  (void)state;
  char region[64];
  const char *e = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>"
                  "AuthorizationHeaderMalformed</Code><Message>The "
                  "authorization header is malformed; the region "
                  "'us-east-1' is wrong; expecting 'eu-west-1'</Message>"
                  "<Region>eu-west-1</Region><RequestId>4442587FB7D0A2F9"
                  "</RequestId></Error>";
  assert_true(stoke__s3_error_region(e, strlen(e), region));
  assert_string_equal(region, "eu-west-1");
  /* Cut off after the Region (the client keeps a body's start only). */
  const char *r = strstr(e, "</Region>") + strlen("</Region>");
  assert_true(stoke__s3_error_region(e, (size_t)(r - e), region));
  assert_string_equal(region, "eu-west-1");
  /* Cut off inside it: no region (never a prefix of one). */
  assert_false(stoke__s3_error_region(e, (size_t)(r - e) - 12, region));
  assert_string_equal(region, "");
  const char *moved = "<Error><Code>PermanentRedirect</Code><Bucket>b"
                      "</Bucket><Region>ap-south-1</Region></Error>";
  assert_true(stoke__s3_error_region(moved, strlen(moved), region));
  assert_string_equal(region, "ap-south-1");
  /* A 301 that names only the Endpoint: the region of its AWS host. */
  static const struct { const char *host, *region; } ends[] = {
      {"b.s3.eu-west-1.amazonaws.com", "eu-west-1"},
      {"s3.ap-northeast-2.amazonaws.com", "ap-northeast-2"},
      {"my.bucket.s3-us-west-2.amazonaws.com", "us-west-2"},
      {"b.s3.amazonaws.com", "us-east-1"},
      {"bs3.eu-west-1.amazonaws.com", ""},   /* "s3" is not a label */
      {"b.s3.eu-west-1.example.com", ""},    /* not AWS: no region */
      {"b.s3.EVIL/x.amazonaws.com", ""},     /* no region name */
      {"minio.local:9000", ""},
  };
  for (size_t k = 0; k < sizeof ends / sizeof ends[0]; k++) {
    char body[256];
    snprintf(body, sizeof body, "<Error><Code>PermanentRedirect</Code>"
             "<Message>The bucket you are attempting to access must be "
             "addressed using the specified endpoint.</Message><Endpoint>%s"
             "</Endpoint><Bucket>b</Bucket></Error>", ends[k].host);
    bool got = stoke__s3_error_region(body, strlen(body), region);
    assert_int_equal(got, ends[k].region[0] != 0);
    assert_string_equal(region, ends[k].region);
  }
  /* A Region wins over the Endpoint. */
  const char *both = "<Error><Endpoint>b.s3.us-west-1.amazonaws.com"
                     "</Endpoint><Region>eu-north-1</Region></Error>";
  assert_true(stoke__s3_error_region(both, strlen(both), region));
  assert_string_equal(region, "eu-north-1");
  /* No Region: nothing to follow. */
  const char *none = "<Error><Code>AccessDenied</Code></Error>";
  assert_false(stoke__s3_error_region(none, strlen(none), region));
  /* A Region that is no region name goes into no host name or scope. */
  const char *host = "<Error><Code>PermanentRedirect</Code><Region>"
                     "evil.example.com/x</Region></Error>";
  assert_false(stoke__s3_error_region(host, strlen(host), region));
  assert_string_equal(region, "");
  const char *upper = "<Error><Region>EU-WEST-1</Region></Error>";
  assert_false(stoke__s3_error_region(upper, strlen(upper), region));
  /* Only Error's own Region, not one nested deeper or under another root. */
  const char *deep = "<Error><Details><Region>eu-west-1</Region></Details>"
                     "</Error>";
  assert_false(stoke__s3_error_region(deep, strlen(deep), region));
  const char *other = "<Result><Region>eu-west-1</Region></Result>";
  assert_false(stoke__s3_error_region(other, strlen(other), region));
  assert_false(stoke__s3_error_region("", 0, region));
  assert_false(stoke__s3_error_region(NULL, 0, region));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_settings),
      cmocka_unit_test(test_profiles),
      cmocka_unit_test(test_urls),
      cmocka_unit_test(test_other_region),
      cmocka_unit_test(test_list_url),
      cmocka_unit_test(test_listing_xml),
      cmocka_unit_test(test_error_code),
      cmocka_unit_test(test_error_region),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
