/* options.c — option and value parsing shared by every command.
**
** A small long-option parser instead of getopt_long(3): the tool builds as
** strict C11 (no GNU extensions), and owning the parser lets every message
** name the option the way the user wrote it, git style:
**
**   stoke: --workers: expected a number, got 'x'
*/
#define _POSIX_C_SOURCE 200809L /* stat */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("stoke: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* ---- options ------------------------------------------------------------- */

void cli_parser_init(cli_parser *p, int argc, char **argv, const char *cmd) {
  memset(p, 0, sizeof(*p));
  p->argc = argc;
  p->argv = argv;
  p->i = 1; /* argv[0] is the command */
  p->cmd = cmd;
}

static void usage_hint(const cli_parser *p) {
  fprintf(stderr, "see 'stoke help %s'\n", p->cmd);
}

/* The value of an option that takes one: the rest of the argument after
** "=" or the short letter, else the next argument. */
static int take_value(cli_parser *p, const char *inline_value,
                      const char **value) {
  if (inline_value) {
    *value = inline_value;
    return 0;
  }
  if (p->i >= p->argc) {
    cli_error("%s: missing value", p->flag);
    usage_hint(p);
    return -1;
  }
  *value = p->argv[p->i++];
  return 0;
}

/* An unknown long option: the closest of the command's (suggest.c). */
static void suggest_option(const cli_opt *opts, const char *name, size_t len) {
  const char *names[256];
  size_t n = 0;
  for (const cli_opt *o = opts; o->name && n < 256; o++) names[n++] = o->name;
  char typed[64];
  snprintf(typed, sizeof typed, "%.*s", (int)len, name);
  cli_suggest(typed, names, n, "option", "--");
}

static int next_short(cli_parser *p, const cli_opt *opts, const char **value) {
  char c = *p->short_rest++;
  snprintf(p->flag_buf, sizeof(p->flag_buf), "-%c", c);
  p->flag = p->flag_buf;
  for (const cli_opt *o = opts; o->name; o++) {
    if (o->short_name != c)
      continue;
    if (o->has_arg) {
      const char *rest = *p->short_rest ? p->short_rest : NULL;
      p->short_rest = NULL;
      if (take_value(p, rest, value))
        return CLI_OPT_ERROR;
    } else if (!*p->short_rest) {
      p->short_rest = NULL;
    }
    return o->id;
  }
  p->short_rest = NULL;
  cli_error("unknown option '%s'", p->flag);
  usage_hint(p);
  return CLI_OPT_ERROR;
}

/* The next argument is an optional value ("block", "block=64MB",
** "uniform") rather than the dataset: a word of letters, digits, '=' and
** '.', without '/', that names no file. */
static int optional_word(const char *a) {
  if (!islower((unsigned char)a[0])) return 0;
  for (const char *c = a; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '=' && *c != '.') return 0;
  struct stat st;
  return stat(a, &st) != 0;
}

int cli_next_opt(cli_parser *p, const cli_opt *opts, const char **value) {
  *value = NULL;
  if (p->short_rest)
    return next_short(p, opts, value);
  if (p->i >= p->argc)
    return CLI_OPT_END;
  const char *a = p->argv[p->i++];
  if (!p->only_args && strcmp(a, "--") == 0) {
    p->only_args = 1; /* everything after "--" is positional */
    if (p->i >= p->argc)
      return CLI_OPT_END;
    a = p->argv[p->i++];
  }
  if (p->only_args || a[0] != '-' || a[1] == '\0') {
    *value = a;
    p->flag = NULL;
    return CLI_OPT_ARG;
  }
  if (a[1] != '-') {
    p->short_rest = a + 1;
    return next_short(p, opts, value);
  }
  const char *name = a + 2;
  const char *eq = strchr(name, '=');
  size_t len = eq ? (size_t)(eq - name) : strlen(name);
  snprintf(p->flag_buf, sizeof(p->flag_buf), "--%.*s", (int)len, name);
  p->flag = p->flag_buf;
  for (const cli_opt *o = opts; o->name; o++) {
    if (strlen(o->name) != len || strncmp(o->name, name, len) != 0)
      continue;
    if (o->has_arg == CLI_ARG_OPTIONAL) {
      if (eq)
        *value = eq + 1;
      else if (p->i < p->argc && optional_word(p->argv[p->i]))
        *value = p->argv[p->i++];
    } else if (o->has_arg) {
      if (take_value(p, eq ? eq + 1 : NULL, value))
        return CLI_OPT_ERROR;
    } else if (eq) {
      cli_error("%s: takes no value", p->flag);
      usage_hint(p);
      return CLI_OPT_ERROR;
    }
    return o->id;
  }
  cli_error("unknown option '%s'", p->flag);
  suggest_option(opts, name, len);
  usage_hint(p);
  return CLI_OPT_ERROR;
}

/* ---- numbers ------------------------------------------------------------- */

int cli_parse_u64(const char *what, const char *s, uint64_t *out) {
  char *end;
  if (!isdigit((unsigned char)s[0])) /* strtoull takes "-1" and " 1" */
    goto bad;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end != '\0')
    goto bad;
  if (errno == ERANGE) {
    cli_error("%s: '%s' is too large", what, s);
    return -1;
  }
  *out = (uint64_t)v;
  return 0;
bad:
  cli_error("%s: expected a number, got '%s'", what, s);
  return -1;
}

int cli_parse_uint(const char *what, const char *s, unsigned lo, unsigned hi,
                   unsigned *out) {
  uint64_t v;
  if (cli_parse_u64(what, s, &v))
    return -1;
  if (v < lo || v > hi) {
    if (hi == (unsigned)-1)
      cli_error("%s: must be at least %u, got '%s'", what, lo, s);
    else
      cli_error("%s: must be between %u and %u, got '%s'", what, lo, hi, s);
    return -1;
  }
  *out = (unsigned)v;
  return 0;
}

int cli_parse_size_t(const char *what, const char *s, size_t lo, size_t *out) {
  uint64_t v;
  if (cli_parse_u64(what, s, &v))
    return -1;
  if (v > (uint64_t)SIZE_MAX) {
    cli_error("%s: '%s' is too large", what, s);
    return -1;
  }
  if (v < lo) {
    cli_error("%s: must be at least %zu, got '%s'", what, lo, s);
    return -1;
  }
  *out = (size_t)v;
  return 0;
}

/* A non-negative decimal number ("5", "1.5", ".5") at the start of s; *end
** after it.  No sign, no exponent, no hex, no inf or nan. */
static int leading_number(const char *s, double *v, const char **end) {
  const char *p = s;
  int digits = 0;
  while (isdigit((unsigned char)*p)) {
    p++;
    digits++;
  }
  if (*p == '.') {
    p++;
    while (isdigit((unsigned char)*p)) {
      p++;
      digits++;
    }
  }
  if (!digits)
    return -1;
  char buf[64];
  size_t len = (size_t)(p - s);
  if (len >= sizeof(buf))
    return -1;
  memcpy(buf, s, len);
  buf[len] = '\0';
  *v = strtod(buf, NULL);
  *end = p;
  return 0;
}

int cli_parse_positive(const char *what, const char *s, double *out) {
  double v;
  const char *end;
  if (leading_number(s, &v, &end) || *end != '\0') {
    cli_error("%s: expected a number, got '%s'", what, s);
    return -1;
  }
  if (!(v > 0) || !isfinite(v)) {
    cli_error("%s: must be greater than 0, got '%s'", what, s);
    return -1;
  }
  *out = v;
  return 0;
}

/* ---- durations and sizes ------------------------------------------------- */

static const struct {
  const char *name;
  double ns;
} duration_units[] = {
    {"ns", 1},      {"us", 1e3},     {"ms", 1e6}, {"s", 1e9},
    {"min", 60e9},  {"h", 3600e9},   {NULL, 0}};

int cli_parse_duration(const char *what, const char *s,
                       const char *default_unit, int64_t *ns) {
  double v;
  const char *unit;
  if (leading_number(s, &v, &unit)) {
    cli_error("%s: expected a duration such as 5ms, got '%s'", what, s);
    return -1;
  }
  if (*unit == '\0') {
    if (v == 0) {
      *ns = 0;
      return 0;
    }
    if (!default_unit) {
      cli_error("%s: '%s' needs a unit (ns, us, ms, s, min or h)", what, s);
      return -1;
    }
    unit = default_unit;
  }
  for (int i = 0; duration_units[i].name; i++) {
    if (strcmp(unit, duration_units[i].name) != 0)
      continue;
    double t = v * duration_units[i].ns;
    if (t > 9.2e18) {
      cli_error("%s: '%s' is too long", what, s);
      return -1;
    }
    *ns = (int64_t)llround(t);
    return 0;
  }
  cli_error("%s: unknown unit in '%s' (expected ns, us, ms, s, min or h)",
            what, s);
  return -1;
}

int cli_parse_bytes(const char *what, const char *s, uint64_t *out) {
  static const struct {
    const char *name;
    double mult;
  } units[] = {{"", 1},
               {"B", 1},
               {"K", 1024.0},
               {"KiB", 1024.0},
               {"KB", 1e3},
               {"kB", 1e3},
               {"M", 1048576.0},
               {"MiB", 1048576.0},
               {"MB", 1e6},
               {"G", 1073741824.0},
               {"GiB", 1073741824.0},
               {"GB", 1e9},
               {"T", 1099511627776.0},
               {"TiB", 1099511627776.0},
               {"TB", 1e12},
               {NULL, 0}};
  double v;
  const char *unit;
  if (leading_number(s, &v, &unit)) {
    cli_error("%s: expected a size such as 8GiB, got '%s'", what, s);
    return -1;
  }
  for (int i = 0; units[i].name; i++) {
    if (strcmp(unit, units[i].name) != 0)
      continue;
    double b = v * units[i].mult;
    if (b >= 1.8e19) {
      cli_error("%s: '%s' is too large", what, s);
      return -1;
    }
    *out = (uint64_t)llround(b);
    return 0;
  }
  cli_error("%s: unknown unit in '%s' (expected B, KiB, MiB, GiB, TiB, KB, "
            "MB, GB or TB)",
            what, s);
  return -1;
}

int cli_parse_shape(const char *what, const char *s, int *ndim,
                    int64_t shape[STOKE_MAX_DIMS]) {
  const char *p = s;
  int n = 0;
  for (;;) {
    if (!isdigit((unsigned char)*p))
      goto bad;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno == ERANGE || v == 0 || v > (unsigned long long)INT64_MAX)
      goto bad;
    if (n == STOKE_MAX_DIMS) {
      cli_error("%s: at most %d dimensions, got '%s'", what, STOKE_MAX_DIMS, s);
      return -1;
    }
    shape[n++] = (int64_t)v;
    p = end;
    if (*p == '\0')
      break;
    if (*p != 'x')
      goto bad;
    p++;
  }
  *ndim = n;
  return 0;
bad:
  cli_error("%s: expected a shape such as 3x32x32 (positive extents), "
            "got '%s'",
            what, s);
  return -1;
}

/* The report library's formatters, under the names the tool's parsers pair
** with. */
void cli_fmt_duration(int64_t ns, char *buf, size_t n) {
  report_fmt_duration(ns, buf, n);
}

void cli_fmt_shape(int ndim, const int64_t *shape, char *buf, size_t n) {
  report_fmt_shape(ndim, shape, buf, n);
}

void cli_format_bytes(char *buf, size_t n, uint64_t b) {
  report_fmt_bytes(buf, n, b);
}
