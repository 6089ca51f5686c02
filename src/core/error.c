/* error.c — error codes, their texts, and the per-thread message of a
** failed create (the only thread-local state: there is no handle yet). */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>

static _Thread_local char tls_msg[STOKE__ERRMSG_CAP];

const char *stoke_version(void) { return STOKE_VERSION_STRING; }

const char *stoke_strerror(int code) {
  switch (code) {
  case STOKE_OK: return "success";
  case STOKE_END: return "end of epoch";
  case STOKE_AGAIN: return "no batch yet: call again";
#define STOKE__ERR_CASE(name, value, text) \
  case STOKE_E##name: return text;
    STOKE_ERRNO_MAP(STOKE__ERR_CASE)
#undef STOKE__ERR_CASE
  default: return "unknown error";
  }
}

int stoke__errf(char *err, size_t cap, int code, const char *fmt, ...) {
  if (err && cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
  }
  return code;
}

int stoke__set_tls_error(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
  va_end(ap);
  return code;
}

void stoke__clear_tls_error(void) { tls_msg[0] = '\0'; }

const char *stoke__tls_error(void) { return tls_msg; }

void stoke__format_bytes(uint64_t n, char *buf, size_t cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)n;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024.0;
    u++;
  }
  if (u == 0)
    snprintf(buf, cap, "%llu B", (unsigned long long)n);
  else
    snprintf(buf, cap, "%.1f %s", v, units[u]);
}

void stoke__bug(const char *file, int line, const char *msg) {
  fprintf(stderr, "stoke: internal error at %s:%d: %s\n", file, line, msg);
  abort();
}
