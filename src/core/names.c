/* names.c — what every layer shares about the public enums: their names
** (for messages, tables, JSON and traces), the sizes of dtypes and fields,
** and which stages are a sample's own work.  Kept at the bottom so that no
** layer depends on another just to print an enum. */
#include "core/core.h"

size_t stoke_dtype_size(int dtype) {
  switch (dtype) {
  case STOKE_U8:
  case STOKE_I8:
  case STOKE_BOOL: return 1;
  case STOKE_I16:
  case STOKE_BF16:
  case STOKE_F16: return 2;
  case STOKE_I32:
  case STOKE_F32: return 4;
  case STOKE_I64:
  case STOKE_F64: return 8;
  default: return 0;
  }
}

size_t stoke__field_bytes(const stoke_field_desc *d) {
  size_t n = stoke_dtype_size(d->dtype);
  if (n == 0 || d->ndim < 0 || d->ndim > STOKE_MAX_DIMS) return 0;
  for (int i = 0; i < d->ndim; i++) {
    if (d->shape[i] <= 0) return 0;
    if (!stoke__mul_ok(n, (size_t)d->shape[i], &n)) return 0;
  }
  return n;
}

const char *stoke_dtype_name(int dtype) {
  switch (dtype) {
  case STOKE_U8: return "u8";
  case STOKE_I32: return "i32";
  case STOKE_I64: return "i64";
  case STOKE_F16: return "f16";
  case STOKE_F32: return "f32";
  case STOKE_F64: return "f64";
  case STOKE_I8: return "i8";
  case STOKE_I16: return "i16";
  case STOKE_BOOL: return "bool";
  case STOKE_BF16: return "bf16";
  default: return "?";
  }
}

const char *stoke_stage_name(int stage) {
  static const char *const names[STOKE_STAGE_COUNT] = {
      "read",   "decode",   "transform", "slot_wait",
      "copy",   "python",   "gil_wait",  "collate"};
  if (stage < 0 || stage >= STOKE_STAGE_COUNT) return "?";
  return names[stage];
}

bool stoke__stage_is_work(int stage) {
  return (stage >= STOKE_STAGE_READ && stage <= STOKE_STAGE_TRANSFORM) ||
         (stage >= STOKE_STAGE_PYTHON && stage <= STOKE_STAGE_COLLATE);
}

const char *stoke_autotune_kind_name(int kind) {
  switch (kind) {
  case STOKE_AUTOTUNE_GROW: return "grow";
  case STOKE_AUTOTUNE_SHRINK: return "shrink";
  case STOKE_AUTOTUNE_DEEPER: return "deeper";
  case STOKE_AUTOTUNE_SHALLOWER: return "shallower";
  case STOKE_AUTOTUNE_ROLLBACK: return "rollback";
  case STOKE_AUTOTUNE_LIMIT: return "limit";
  case STOKE_AUTOTUNE_STEP: return "step";
  case STOKE_AUTOTUNE_OUTSIDE: return "outside";
  case STOKE_AUTOTUNE_IO_MORE: return "io-more";
  case STOKE_AUTOTUNE_IO_FEWER: return "io-fewer";
  default: return "?";
  }
}
