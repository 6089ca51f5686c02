/* s3_conf.c — the S3 settings (s3.h): the AWS_* environment, then, for
** what it left unset, a profile's keys, region and endpoint from the AWS
** shared files, ~/.aws/credentials and ~/.aws/config.
**
** The precedence is the AWS tools' (the CLI and the SDKs agree):
**   - the profile: AWS_PROFILE, else AWS_DEFAULT_PROFILE, else "default";
**   - the files: AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE (a
**     leading "~/" is the home folder), else ~/.aws/credentials and
**     ~/.aws/config;
**   - the keys: the environment's pair, else the credentials file's
**     [NAME], else the config file's [profile NAME] ([default] for the
**     default profile), each source whole, never a key from one and the
**     secret from another;
**   - the region and the endpoint_url: the environment, else the config
**     file's profile, else the credentials file's.
** A profile named in AWS_PROFILE that neither file has is an error, as it
** is for the CLI, since silently sending unsigned requests would read as
** "access denied" far from its cause.  So is a profile whose credentials
** come from elsewhere (a role, SSO, a credential process): stoke does not
** run those, and says so instead of sending unsigned requests.
**
** The files are INI as botocore reads them: "[section]", "key = value",
** comments on lines of their own ('#' or ';'), and indented lines (a
** nested "s3 =" block's settings) skipped.  Errors name the file and the
** line, never a value (it may be a secret). */
#define _POSIX_C_SOURCE 200809L
#include "storage/s3.h"

#include "storage/url.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the environment ---------------------------------------------------- */

static int profile_read(stoke__s3_conf *c, bool keys_from_env, char *err,
                        size_t cap);

static int env_copy(const char *name, char *dst, size_t cap, char *err,
                    size_t ecap) {
  const char *v = getenv(name);
  dst[0] = 0;
  if (!v) return 0;
  if (strlen(v) >= cap)
    /* The name only: the value may be a secret. */
    return stoke__errf(err, ecap, STOKE_EINVAL, "s3: %s is longer than %zu "
                       "bytes", name, cap - 1);
  memcpy(dst, v, strlen(v) + 1);
  return 0;
}

int stoke__s3_conf_read(stoke__s3_conf *c, char *err, size_t cap) {
  memset(c, 0, sizeof *c);
  /* The service's own variable first, as the AWS tools read it. */
  int rc = env_copy("AWS_ENDPOINT_URL_S3", c->endpoint, sizeof c->endpoint,
                    err, cap);
  if (!rc && !c->endpoint[0])
    rc = env_copy("AWS_ENDPOINT_URL", c->endpoint, sizeof c->endpoint, err,
                  cap);
  if (!rc) rc = env_copy("AWS_REGION", c->region, sizeof c->region, err, cap);
  if (!rc && !c->region[0])
    rc = env_copy("AWS_DEFAULT_REGION", c->region, sizeof c->region, err,
                  cap);
  if (!rc) rc = env_copy("AWS_ACCESS_KEY_ID", c->key_id, sizeof c->key_id,
                         err, cap);
  if (!rc) rc = env_copy("AWS_SECRET_ACCESS_KEY", c->secret,
                         sizeof c->secret, err, cap);
  if (!rc) rc = env_copy("AWS_SESSION_TOKEN", c->token, sizeof c->token, err,
                         cap);
  if (rc) return rc;
  /* Either half of the environment's pair means the environment's keys
  ** (a half is refused below); else the shared files' profile. */
  bool keys_from_env = c->key_id[0] || c->secret[0];
  rc = profile_read(c, keys_from_env, err, cap);
  if (rc) return rc;
  if (!c->region[0]) snprintf(c->region, sizeof c->region, "us-east-1");
  size_t n = strlen(c->endpoint);
  while (n && c->endpoint[n - 1] == '/') c->endpoint[--n] = 0;
  if (n && !stoke__url_is_http(c->endpoint))
    return stoke__errf(err, cap, STOKE_EINVAL, "s3: the endpoint "
                       "(AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the "
                       "profile's endpoint_url) must be an http:// or "
                       "https:// URL");
  /* The region is part of a host name and of the signature's scope. */
  for (const char *p = c->region; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
      return stoke__errf(err, cap, STOKE_EINVAL, "s3: the region \"%s\" is "
                         "not a region name", c->region);
  if (!c->key_id[0] != !c->secret[0])
    return stoke__errf(err, cap, STOKE_EINVAL, "s3: AWS_ACCESS_KEY_ID and "
                       "AWS_SECRET_ACCESS_KEY come together (set both, or "
                       "neither for unsigned requests)");
  const char *mk = getenv("STOKE_TEST_S3_MAX_KEYS");
  if (mk && *mk) {
    char *end;
    unsigned long v = strtoul(mk, &end, 10);
    if (*end || v == 0 || v > 1000)
      return stoke__errf(err, cap, STOKE_EINVAL, "s3: STOKE_TEST_S3_MAX_KEYS "
                         "must be 1..1000");
    c->max_keys = (unsigned)v;
  }
  return 0;
}

int stoke__s3_conf_new(const stoke_allocator *a, stoke__s3_conf **out,
                       char *err, size_t cap) {
  *out = stoke__alloc(a, sizeof **out);
  if (!*out) return stoke__errf(err, cap, STOKE_ENOMEM, "out of memory");
  int rc = stoke__s3_conf_read(*out, err, cap);
  if (rc) {
    stoke__s3_conf_free(a, *out);
    *out = NULL;
  }
  return rc;
}

void stoke__s3_wipe(void *p, size_t n) {
  volatile unsigned char *v = p;
  for (size_t i = 0; i < n; i++) v[i] = 0;
}

void stoke__s3_conf_free(const stoke_allocator *a, stoke__s3_conf *c) {
  if (!c) return;
  stoke__s3_wipe(c, sizeof *c);
  stoke__free(a, c);
}

/* ---- the shared files --------------------------------------------------- */

/* A shared file larger than this is refused: they hold a few profiles. */
#define PROFILE_FILE_MAX ((size_t)1 << 20)

/* What one profile's section of one file holds. */
typedef struct section {
  bool found;
  char key_id[sizeof((stoke__s3_conf *)0)->key_id];
  char secret[sizeof((stoke__s3_conf *)0)->secret];
  char token[sizeof((stoke__s3_conf *)0)->token];
  char region[sizeof((stoke__s3_conf *)0)->region];
  char endpoint[sizeof((stoke__s3_conf *)0)->endpoint];
  const char *elsewhere; /* a setting that takes credentials from elsewhere */
} section;

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

/* The settings that get credentials in ways stoke does not follow. */
static const char *elsewhere_key(const char *k) {
  static const char *const keys[] = {
      "role_arn", "credential_process", "sso_session", "sso_start_url",
      "web_identity_token_file", "credential_source"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!strcmp(k, keys[i])) return keys[i];
  return NULL;
}

static int put(char *dst, size_t cap, const char *v, const char *shown,
               unsigned line, const char *key, char *err, size_t ecap) {
  if (strlen(v) >= cap)
    return stoke__errf(err, ecap, STOKE_EINVAL, "s3: %s line %u: %s is "
                       "longer than %zu bytes", shown, line, key, cap - 1);
  memcpy(dst, v, strlen(v) + 1);
  return 0;
}

/* One setting of the wanted section. */
static int take(section *s, const char *k, const char *v, const char *shown,
                unsigned line, char *err, size_t cap) {
  if (!strcmp(k, "aws_access_key_id"))
    return put(s->key_id, sizeof s->key_id, v, shown, line, k, err, cap);
  if (!strcmp(k, "aws_secret_access_key"))
    return put(s->secret, sizeof s->secret, v, shown, line, k, err, cap);
  if (!strcmp(k, "aws_session_token"))
    return put(s->token, sizeof s->token, v, shown, line, k, err, cap);
  if (!strcmp(k, "region"))
    return put(s->region, sizeof s->region, v, shown, line, k, err, cap);
  if (!strcmp(k, "endpoint_url"))
    return put(s->endpoint, sizeof s->endpoint, v, shown, line, k, err,
               cap);
  if (!s->elsewhere) s->elsewhere = elsewhere_key(k);
  return 0;
}

/* Find [want] in text (NUL-terminated, modified in place) into *s. */
static int parse(char *text, const char *want, const char *shown,
                 section *s, char *err, size_t cap) {
  bool in = false;
  unsigned line = 0;
  for (char *p = text; p && *p;) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = 0;
    char *raw = p;
    p = nl ? nl + 1 : NULL;
    line++;
    if (*raw == ' ' || *raw == '\t') continue; /* nested block or blank */
    char *l = trim(raw);
    if (!*l || *l == '#' || *l == ';') continue;
    if (*l == '[') {
      char *end = strchr(l, ']');
      if (!end || end[1])
        return stoke__errf(err, cap, STOKE_EFORMAT, "s3: %s line %u: a "
                           "section header without its ']'", shown, line);
      *end = 0;
      in = !strcmp(trim(l + 1), want);
      if (in) s->found = true;
      continue;
    }
    char *eq = strchr(l, '=');
    if (!eq)
      return stoke__errf(err, cap, STOKE_EFORMAT, "s3: %s line %u: neither "
                         "a [section] nor key = value", shown, line);
    if (!in) continue;
    *eq = 0;
    int rc = take(s, trim(l), trim(eq + 1), shown, line, err, cap);
    if (rc) return rc;
  }
  return 0;
}

/* The path of a shared file: the variable's value, else ~/.aws/NAME. */
static int file_path(const char *var, const char *name, char *buf,
                     size_t cap, char *err, size_t ecap) {
  const char *v = getenv(var), *home = getenv("HOME");
  int n;
  if (v && *v) {
    if (v[0] == '~' && v[1] == '/')
      n = snprintf(buf, cap, "%s%s", home ? home : "", v + 1);
    else
      n = snprintf(buf, cap, "%s", v);
  } else {
    if (!home || !*home) {
      buf[0] = 0; /* no home folder: no default files */
      return 0;
    }
    n = snprintf(buf, cap, "%s/.aws/%s", home, name);
  }
  if (n < 0 || (size_t)n >= cap)
    return stoke__errf(err, ecap, STOKE_EINVAL, "s3: the path of %s is "
                       "longer than %zu bytes", var, cap - 1);
  return 0;
}

/* Read section `want` of file path into *s.  A missing file holds
** nothing; one that cannot be read or is too large is an error. */
static int read_file(const char *path, const char *want, section *s,
                     char *err, size_t cap) {
  memset(s, 0, sizeof *s);
  if (!path[0]) return 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT || errno == ENOTDIR) return 0;
    return stoke__errf(err, cap, STOKE_EIO, "s3: %s: %s", path,
                       strerror(errno));
  }
  char *text = malloc(PROFILE_FILE_MAX + 1);
  size_t n = text ? fread(text, 1, PROFILE_FILE_MAX + 1, f) : 0;
  bool bad = text && ferror(f);
  fclose(f);
  int rc = 0;
  if (!text)
    rc = stoke__errf(err, cap, STOKE_ENOMEM, "s3: out of memory for %s",
                     path);
  else if (bad)
    rc = stoke__errf(err, cap, STOKE_EIO, "s3: %s: read error", path);
  else if (n > PROFILE_FILE_MAX)
    rc = stoke__errf(err, cap, STOKE_EFORMAT, "s3: %s is larger than %zu "
                     "bytes", path, PROFILE_FILE_MAX);
  else {
    text[n] = 0;
    rc = parse(text, want, path, s, err, cap);
  }
  if (text) {
    stoke__s3_wipe(text, n); /* it held the secret */
    free(text);
  }
  return rc;
}

static void copy_if_empty(char *dst, size_t cap, const char *a,
                          const char *b) {
  const char *v = a[0] ? a : b;
  if (!dst[0] && v[0]) snprintf(dst, cap, "%s", v);
}

static int profile_read(stoke__s3_conf *c, bool keys_from_env, char *err,
                        size_t cap) {
  const char *named = getenv("AWS_PROFILE");
  const char *var = "AWS_PROFILE";
  if (!named || !*named) {
    named = getenv("AWS_DEFAULT_PROFILE");
    var = "AWS_DEFAULT_PROFILE";
  }
  bool explicit = named && *named;
  const char *profile = explicit ? named : "default";
  char want_config[160];
  if (strlen(profile) > 128)
    return stoke__errf(err, cap, STOKE_EINVAL, "s3: %s is longer than 128 "
                       "bytes", var);
  snprintf(want_config, sizeof want_config, "%s%s",
           strcmp(profile, "default") ? "profile " : "", profile);

  char cred_path[4096], conf_path[4096];
  int rc = file_path("AWS_SHARED_CREDENTIALS_FILE", "credentials", cred_path,
                     sizeof cred_path, err, cap);
  if (!rc)
    rc = file_path("AWS_CONFIG_FILE", "config", conf_path, sizeof conf_path,
                   err, cap);
  if (rc) return rc;
  section *s = calloc(2, sizeof *s); /* large: off the stack */
  if (!s) return stoke__errf(err, cap, STOKE_ENOMEM, "s3: out of memory");
  section *cred = &s[0], *conf = &s[1];
  rc = read_file(cred_path, profile, cred, err, cap);
  if (!rc) rc = read_file(conf_path, want_config, conf, err, cap);
  if (!rc && explicit && !cred->found && !conf->found)
    rc = stoke__errf(err, cap, STOKE_EINVAL, "s3: the profile \"%s\" (%s) "
                     "is in neither %s nor %s", profile, var,
                     cred_path[0] ? cred_path : "~/.aws/credentials",
                     conf_path[0] ? conf_path : "~/.aws/config");
  if (!rc && !keys_from_env) {
    const section *from = cred->key_id[0] || cred->secret[0] ? cred
                          : conf->key_id[0] || conf->secret[0] ? conf
                                                               : NULL;
    const char *shown = from == cred ? cred_path : conf_path;
    if (from && (!from->key_id[0] || !from->secret[0]))
      rc = stoke__errf(err, cap, STOKE_EINVAL, "s3: the profile \"%s\" in %s "
                       "has %s without %s", profile, shown,
                       from->key_id[0] ? "aws_access_key_id"
                                       : "aws_secret_access_key",
                       from->key_id[0] ? "aws_secret_access_key"
                                       : "aws_access_key_id");
    else if (from) {
      memcpy(c->key_id, from->key_id, sizeof c->key_id);
      memcpy(c->secret, from->secret, sizeof c->secret);
      memcpy(c->token, from->token, sizeof c->token);
    } else if (cred->elsewhere || conf->elsewhere)
      rc = stoke__errf(err, cap, STOKE_EINVAL, "s3: the profile \"%s\" takes "
                       "its credentials from %s, which stoke does not "
                       "follow: export AWS_ACCESS_KEY_ID, "
                       "AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (aws "
                       "configure export-credentials --format env)", profile,
                       cred->elsewhere ? cred->elsewhere : conf->elsewhere);
  }
  if (!rc) {
    copy_if_empty(c->region, sizeof c->region, conf->region, cred->region);
    copy_if_empty(c->endpoint, sizeof c->endpoint, conf->endpoint,
                  cred->endpoint);
  }
  stoke__s3_wipe(s, 2 * sizeof *s);
  free(s);
  return rc;
}
