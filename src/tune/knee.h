/* knee.h — TRANSITIONAL: the knee moved to src/model/ (knee.h).  This
** keeps the files that include "tune/knee.h" building; TODO-merge: remove
** once they include "model/knee.h". */
#ifndef STOKE_TUNE_KNEE_H
#define STOKE_TUNE_KNEE_H

#include "model/knee.h"

#endif
