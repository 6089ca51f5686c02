/* autotune.h — TRANSITIONAL: the online autotuner's controller moved to
** src/model/autotune_controller.h, its names from stoke__at_ to
** stoke__atc_ (the live autotuner's glue in src/pipeline/autotune.c keeps
** stoke__at_).  These aliases keep the glue and the tests that use the old
** names building; TODO-merge: remove once they use the new names. */
#ifndef STOKE_TUNE_AUTOTUNE_H
#define STOKE_TUNE_AUTOTUNE_H

#include "model/autotune_controller.h"

#define STOKE__AT_COST_WINDOWS STOKE__ATC_COST_WINDOWS
#define STOKE__AT_GROW_HEADROOM STOKE__ATC_GROW_HEADROOM
#define STOKE__AT_MAX_GROW_FACTOR STOKE__ATC_MAX_GROW_FACTOR
#define STOKE__AT_MODEL_MAX_WORKERS STOKE__ATC_MODEL_MAX_WORKERS
#define STOKE__AT_QUIET STOKE__ATC_QUIET
#define STOKE__AT_SHRINK_HEADROOM STOKE__ATC_SHRINK_HEADROOM
#define STOKE__AT_SHRINK_SLOWER STOKE__ATC_SHRINK_SLOWER
#define STOKE__AT_SHRINK_WAIT STOKE__ATC_SHRINK_WAIT
#define STOKE__AT_STALL STOKE__ATC_STALL
#define STOKE__AT_STEP_CHANGE STOKE__ATC_STEP_CHANGE
#define stoke__at_decide stoke__atc_decide
typedef stoke__atc_decision stoke__at_decision;
#define stoke__at_init stoke__atc_init
typedef stoke__atc_limits stoke__at_limits;
typedef stoke__atc_state stoke__at_state;
typedef stoke__atc_window stoke__at_window;
#define stoke__at_workers_needed stoke__atc_workers_needed
#define stoke__at_workers_needed_model stoke__atc_workers_needed_model

#endif
