/* machine.c — what the numbers were measured on.
**
** A benchmark result without its machine is not a result: every JSON report
** carries the CPU model, online cores, memory, kernel, the compiler that
** built this tool and the library version.  Linux first; fields that cannot
** be read are "unknown" (or 0), never an error.
*/
#define _XOPEN_SOURCE 700 /* sysconf, uname, getrusage in strict C11 */

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "report.h"

#if defined(__VERSION__) && defined(__GNUC__) && !defined(__clang__)
#define COMPILER "gcc " __VERSION__
#elif defined(__VERSION__)
#define COMPILER __VERSION__ /* clang's already names itself */
#else
#define COMPILER "unknown"
#endif

/* The value of the first "key<spaces>: value" line of a /proc file, without
** its newline, in buf.  Returns 0, or -1 if absent. */
static int proc_field(const char *path, const char *key, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  char line[512];
  size_t klen = strlen(key);
  int rc = -1;
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, key, klen) != 0)
      continue;
    const char *p = line + klen;
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p != ':')
      continue;
    p++;
    while (*p == ' ' || *p == '\t')
      p++;
    snprintf(buf, n, "%s", p);
    buf[strcspn(buf, "\n")] = '\0';
    rc = 0;
    break;
  }
  fclose(f);
  return rc;
}

static void cpu_model(char *buf, size_t n) {
  /* x86 says "model name"; some ARM kernels only "Hardware" or "Model". */
  static const char *const keys[] = {"model name", "Model", "Hardware",
                                     "cpu model", NULL};
  for (int i = 0; keys[i]; i++)
    if (proc_field("/proc/cpuinfo", keys[i], buf, n) == 0 && buf[0])
      return;
  snprintf(buf, n, "unknown");
}

static uint64_t memory_bytes(void) {
  char buf[128];
  unsigned long long kib;
  if (proc_field("/proc/meminfo", "MemTotal", buf, sizeof(buf)) == 0 &&
      sscanf(buf, "%llu", &kib) == 1)
    return (uint64_t)kib * 1024;
  return 0;
}

uint64_t report_peak_rss_bytes(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss < 0)
    return 0;
  return (uint64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

double report_online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (double)n : 0;
}

cJSON *report_machine_json(void) {
  cJSON *m = cJSON_CreateObject();
  if (!m)
    return NULL;
  char cpu[256];
  cpu_model(cpu, sizeof(cpu));
  cJSON_AddStringToObject(m, "cpu", cpu);
  cJSON_AddNumberToObject(m, "cores", report_online_cores());
  cJSON_AddNumberToObject(m, "memory_bytes", (double)memory_bytes());
  struct utsname u;
  if (uname(&u) == 0) {
    char kernel[2 * sizeof(u.release) + 2];
    snprintf(kernel, sizeof(kernel), "%s %s", u.sysname, u.release);
    cJSON_AddStringToObject(m, "kernel", kernel);
    cJSON_AddStringToObject(m, "arch", u.machine);
  } else {
    cJSON_AddStringToObject(m, "kernel", "unknown");
    cJSON_AddStringToObject(m, "arch", "unknown");
  }
  cJSON_AddStringToObject(m, "compiler", COMPILER);
  cJSON_AddStringToObject(m, "stoke_version", stoke_version());
  return m;
}
