/* advice_words.c — the tool's words for the settings an advice names: its
** flags ("-j 4", "--prefetch 3"), so that `stoke profile` says what to type
** next.  They are the words stoke_advice.text has always been written in,
** so the library keeps the one copy (stoke_advice_name with no words of
** its own); the sentence around them is the library's too
** (stoke_advice_format). */
#include "cli.h"

static void flag_words(void *user, int setting, unsigned v, unsigned workers,
                       char *buf, size_t n) {
  (void)user;
  stoke_advice_name(NULL, setting, v, workers, buf, n);
}

const stoke_advice_words cli_advice_words = {flag_words, NULL};
