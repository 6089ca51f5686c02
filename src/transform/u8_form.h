/* u8_form.h — a field written as u8 pixels and turned into its float
** output elsewhere (on the device), and the table that does it (internal).
**
** The source layer fills it (src/source/image.c: stoke__source_u8_form),
** from the transform's own arithmetic (stoke__tf_norm_table); the device
** layer copies the u8 pixels and looks each one up in the table, so the
** output is the host path's bit for bit.  Plain C that nvcc compiles too
** (src/device/kernels.h includes it): no other header of stoke's. */
#ifndef STOKE_TRANSFORM_U8_FORM_H
#define STOKE_TRANSFORM_U8_FORM_H

#include <stddef.h>
#include <stdint.h>

/* The value of u8 v in channel c, f32 and as IEEE binary16 bits. */
typedef struct stoke__norm_lut {
  float f32[3][256];
  uint16_t f16[3][256];
} stoke__norm_lut;

/* A field that a source can write as u8 pixels and that the device turns
** into the source's float output. */
typedef struct stoke__u8_form {
  size_t field;          /* which field of the source */
  size_t u8_bytes;       /* one sample of it as u8 */
  int hwc;               /* layout: 0 CHW, 1 HWC */
  uint32_t plane;        /* H * W */
  int dtype;             /* the source's dtype of it: STOKE_F32 or F16 */
  stoke__norm_lut lut;   /* the host path's values (stoke__tf_norm_table) */
} stoke__u8_form;

#endif /* STOKE_TRANSFORM_U8_FORM_H */
