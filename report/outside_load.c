/* outside_load.c — the machine's other load while a run measured, as the
** reports say it.
**
** The library measures it (src/stats/outside.c: the consumer clock of the
** loader and of stoke_twoclock, so that `stoke bench`, `stoke profile`,
** stoke.Loader, stoke.DataLoader, stoke.TwoClock and the doctor all carry
** the same figures, and the live autotuner can hold its decisions on the
** same rule); here it becomes summary.outside_load and the verdict's note,
** which says, exactly when it moved, by how much the figures may be
** off. */
#include "report.h"

cJSON *report_outside_json(const stoke_stats *st) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  cJSON_AddNumberToObject(j, "windows", (double)st->outside_windows);
  cJSON_AddNumberToObject(j, "window_s", st->outside_window_s);
  cJSON_AddNumberToObject(j, "mean_cores", st->outside_mean_cores);
  /* Before a window all three are 0. */
  cJSON_AddNumberToObject(j, "min_cores", st->outside_min_cores);
  cJSON_AddNumberToObject(j, "max_cores", st->outside_max_cores);
  cJSON_AddBoolToObject(j, "moved", st->outside_moved != 0);
  cJSON_AddNumberToObject(j, "shift_frac", st->outside_shift_frac);
  /* The run delay's sign (stoke_stats.outside_delay_*): which of the two
  ** said the move, and its figures. */
  cJSON_AddBoolToObject(j, "other_moved", st->outside_other_moved != 0);
  cJSON_AddBoolToObject(j, "delay_moved", st->outside_delay_moved != 0);
  cJSON_AddNumberToObject(j, "delay_windows",
                          (double)st->outside_delay_windows);
  cJSON_AddNumberToObject(j, "delay_min_cores", st->outside_delay_min_cores);
  cJSON_AddNumberToObject(j, "delay_max_cores", st->outside_delay_max_cores);
  cJSON_AddNumberToObject(j, "taken_cores", st->outside_taken_cores);
  return j;
}

void report_outside_print(FILE *f, const stoke_stats *st) {
  if (!st->outside_moved) return;
  double cores = report_online_cores();
  /* Both signs start the same way, so that a reader (or a script) looking
  ** for the move finds it whichever said it; the delay's names itself. */
  char delay[160] = "";
  if (st->outside_delay_moved)
    snprintf(delay, sizeof delay,
             "; this run's threads waited for a core %.1f to %.1f cores' "
             "worth, %.1f cores taken from them",
             st->outside_delay_min_cores, st->outside_delay_max_cores,
             st->outside_taken_cores);
  fprintf(f,
          "note: the machine's other load moved from %.1f to %.1f cores (of "
          "%.0f)%s while this run measured: its figures may be off by up to "
          "%.0f%%\n",
          st->outside_min_cores, st->outside_max_cores, cores > 0 ? cores : 1,
          delay, 100 * st->outside_shift_frac);
}
