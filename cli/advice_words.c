/* advice_words.c — the tool's words for the settings an advice names: its
** flags ("-j 4", "--prefetch 3"), so that `stoke profile` says what to type
** next.  The sentence around them is the library's (stoke_advice_format). */
#include <stdio.h>

#include "cli.h"

static void flag_words(void *user, int setting, unsigned v, unsigned workers,
                       char *buf, size_t n) {
  (void)user;
  (void)workers;
  switch (setting) {
  case STOKE_SETTING_WORKERS: snprintf(buf, n, "-j %u", v); break;
  case STOKE_SETTING_PREFETCH: snprintf(buf, n, "--prefetch %u", v); break;
  case STOKE_SETTING_SAME_WORKERS: snprintf(buf, n, "with that -j"); break;
  /* The flag, and the Python argument beside it for readers of the
  ** tool's output who train from Python. */
  case STOKE_SETTING_ECHO:
    snprintf(buf, n, "--echo %u (Loader(echo=%u))", v, v);
    break;
  case STOKE_SETTING_PIN_MEMORY:
    snprintf(buf, n, "pin_memory 1, --pin-memory");
    break;
  case STOKE_SETTING_DEVICE_PREFETCH:
    snprintf(buf, n, "--device-prefetch %u", v);
    break;
  case STOKE_SETTING_MAX_SIDE:
    snprintf(buf, n, "stoke pack DATA -o OUT --max-side %u", v);
    break;
  case STOKE_SETTING_ONE_THREAD: snprintf(buf, n, "OMP_NUM_THREADS=1"); break;
  case STOKE_SETTING_C_TRANSFORMS:
    snprintf(buf, n, "stoke.Loader(path, transform=...)");
    break;
  default: snprintf(buf, n, "?");
  }
}

const stoke_advice_words cli_advice_words = {flag_words, NULL};
