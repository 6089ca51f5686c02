/* model.h — TRANSITIONAL: the queue model moved to src/model/ (model.h).
** This keeps src/diagnose/advise.c's `#include "model.h"` building;
** TODO-merge: remove once it includes "model/model.h". */
#ifndef STOKE_DIAGNOSE_MODEL_H
#define STOKE_DIAGNOSE_MODEL_H

#include "model/model.h"

#endif
