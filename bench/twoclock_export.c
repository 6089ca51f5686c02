/* twoclock_export.c — what the exports cost the consumer of a
** stoke_twoclock per step, without Python in the way: the same empty loop of
** enter/leave, plain and with JSON lines, the metrics file and publishing,
** alternating, best of REPEATS.  Under callgrind (instructions per step,
** independent of the machine's load) run one mode at a time:
**
**   cc -O2 -Iinclude -Ibuild/include bench/twoclock_export.c \
**      -Lbuild -lstoke -o /tmp/twoclock_export
**   /tmp/twoclock_export [STEPS [MODE]]   MODE: plain | jsonl | all
**
** It writes its files in $TMPDIR (default /tmp) and removes them. */
#define _POSIX_C_SOURCE 200809L
#include <stoke.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ns per step of `steps` enter/leave pairs in `mode`. */
static double run(const char *mode, long steps, const char *dir) {
  char jsonl[512], prom[512];
  snprintf(jsonl, sizeof jsonl, "%s/twoclock_export.%ld.jsonl", dir,
           (long)getpid());
  snprintf(prom, sizeof prom, "%s/twoclock_export.%ld.prom", dir,
           (long)getpid());
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  cfg.warmup_epochs = 0;
  cfg.warmup_end_steps = 0;
  cfg.warmup_end_ns = 0;
  cfg.publish = STOKE_PUBLISH_OFF;
  if (strcmp(mode, "plain") != 0) cfg.log_jsonl_path = jsonl;
  if (strcmp(mode, "all") == 0) {
    cfg.metrics_path = prom;
    cfg.metrics_every_ns = 1000000000;
    cfg.publish = STOKE_PUBLISH_ON;
  }
  stoke_twoclock *c;
  if (stoke_twoclock_create(&cfg, &c) != 0) {
    fprintf(stderr, "twoclock_export: %s\n", stoke_errmsg(NULL));
    exit(1);
  }
  double t0 = now_s();
  for (long i = 0; i < steps; i++) {
    stoke_twoclock_enter(c);
    stoke_twoclock_leave(c, 256);
  }
  double t = now_s() - t0;
  stoke_twoclock_end_epoch(c);
  stoke_twoclock_destroy(c);
  unlink(jsonl);
  unlink(prom);
  return t * 1e9 / (double)steps;
}

int main(int argc, char **argv) {
  long steps = argc > 1 ? atol(argv[1]) : 1000000;
  const char *only = argc > 2 ? argv[2] : NULL;
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  const char *modes[] = {"plain", "jsonl", "all"};
  if (only) {
    printf("%s: %.1f ns/step\n", only, run(only, steps, dir));
    return 0;
  }
  double best[3] = {1e30, 1e30, 1e30};
  for (int r = 0; r < 5; r++)
    for (int m = 0; m < 3; m++) {
      double v = run(modes[m], steps, dir);
      if (v < best[m]) best[m] = v;
    }
  for (int m = 0; m < 3; m++)
    printf("%-5s %7.1f ns/step  (+%.1f over plain)\n", modes[m], best[m],
           best[m] - best[0]);
  return 0;
}
