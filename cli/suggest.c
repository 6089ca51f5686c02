/* suggest.c — git's "did you mean": the known names closest to a mistyped
** one, by edit distance (an adjacent swap counts as one edit, as in
** git's help.c), printed under the error.
**
**   stoke: unknown option '--wokers'
**
**   The most similar option is
**           --workers
*/
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define SUGGEST_MAX_LEN 64

/* Optimal string alignment distance: insertions, deletions, substitutions
** and swaps of two adjacent characters each cost 1. */
static size_t edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > SUGGEST_MAX_LEN || m > SUGGEST_MAX_LEN) return (size_t)-1;
  size_t d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
  for (size_t i = 0; i <= n; i++) d[i][0] = i;
  for (size_t j = 0; j <= m; j++) d[0][j] = j;
  for (size_t i = 1; i <= n; i++) {
    for (size_t j = 1; j <= m; j++) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  }
  return d[n][m];
}

/* How different a name may be and still be suggested: a third of its
** length, at least 1 and at most 3 edits ("--wokers", "bnech", "--jsno"),
** so that a word that merely shares letters is not offered. */
static size_t tolerance(const char *typed) {
  size_t t = strlen(typed) / 3;
  return t < 1 ? 1 : t > 3 ? 3 : t;
}

size_t cli_suggest(const char *typed, const char *const *names, size_t n,
                   const char *what, const char *prefix) {
  size_t dist[256];
  if (n > 256) n = 256;
  size_t best = (size_t)-1, count = 0;
  for (size_t i = 0; i < n; i++) {
    dist[i] = edit_distance(typed, names[i]);
    if (dist[i] < best) best = dist[i], count = 0;
    if (dist[i] == best) count++;
  }
  if (best == (size_t)-1 || best == 0 || best > tolerance(typed)) return 0;
  fprintf(stderr, "\nThe most similar %s%s\n", what,
          count == 1 ? " is" : "s are");
  for (size_t i = 0; i < n; i++)
    if (dist[i] == best) fprintf(stderr, "\t%s%s\n", prefix, names[i]);
  return count;
}
