/* transform.h — decoded RGB8 pixels to the model's input (internal).
**
** Three steps, each usable alone:
**
**   1. stoke__tf_parse: a spec string such as
**        "random-resized-crop=224,flip,normalize=imagenet,chw,f32"
**      becomes a stoke__tf_spec (a plain struct, parsed once per source).
**   2. stoke__tf_plan: from the image size and the sample's stoke_rng, the
**      crop box in full-resolution pixels, the flip and the output size.
**      Random choices come only from that stream, so a sample's crop is the
**      same whatever the worker and thread.  The decoder may then decode
**      only stoke__tf_plan_window(), possibly DCT-scaled
**      (stoke__tf_plan_dct_denom() suggests how far).
**   3. stoke__tf_apply: resample the box out of whatever the decoder made
**      (a region of the image, maybe at 1/2, 1/4 or 1/8 scale) to the output
**      size, flip, and write straight into the batch slot in the requested
**      layout and dtype, with normalize and the f16 conversion fused.
**
** Resampling is PIL's Image.resize(..., BILINEAR): a separable triangle
** filter whose support widens with the shrink factor (antialiasing),
** horizontal pass then vertical pass, 22-bit fixed-point coefficients and
** a u8 intermediate, exactly as Pillow's libImaging/Resample.c.  For integer
** crop boxes on a full-resolution image the u8 output is bit-identical to
** torchvision's resized_crop on a PIL image, and float outputs equal
** ToTensor + Normalize on it, so models trained on torchvision pipelines see
** the same pixels.
**
** Semantics follow torchvision: RandomResizedCrop then RandomHorizontalFlip,
** or Resize(int) then CenterCrop, then ToTensor/Normalize.  f32 and f16
** without normalize are x/255 (ToTensor).  Images smaller than a
** center-crop without resize are rejected (torchvision would pad).
**
** Thread safety: a stoke__tf_spec is read-only after parsing and may be
** shared by all workers; a stoke__tf_scratch belongs to one worker. */
#ifndef STOKE_TRANSFORM_H
#define STOKE_TRANSFORM_H

#include "core/core.h"

enum {
  STOKE__TF_CROP_NONE = 0,   /* unset: parse never yields it; plan refuses */
  STOKE__TF_CROP_RANDOM = 1, /* random-resized-crop */
  STOKE__TF_CROP_CENTER = 2  /* center-crop, after resize when resize > 0 */
};

enum { STOKE__TF_CHW = 0, STOKE__TF_HWC = 1 };

typedef struct stoke__tf_spec {
  int crop;           /* STOKE__TF_CROP_* */
  int out_h, out_w;   /* output size (the crop size) */
  double scale[2];    /* random-resized-crop area fraction, lo <= hi */
  double ratio[2];    /* random-resized-crop aspect (w/h), lo <= hi */
  int resize;         /* shorter side before center-crop; 0 = no resize */
  double flip_p;      /* probability of a horizontal flip; 0 = never */
  bool normalize;     /* (x/255 - mean) / std; float dtypes only */
  float mean[3], std[3];
  int layout;         /* STOKE__TF_CHW (default) or STOKE__TF_HWC */
  int dtype;          /* STOKE_U8 (default), STOKE_F16 or STOKE_F32 */
} stoke__tf_spec;

/* Parse `text` into *out.  Returns 0, or STOKE_EINVAL with the calling
** thread's message (stoke__tls_error / stoke_errmsg(NULL)) naming the
** offending token and its byte position, e.g.
**   "transform: unknown token 'rotate=3' at position 23".
** `text` is borrowed for the call.  Thread-safe. */
int stoke__tf_parse(const char *text, stoke__tf_spec *out);

/* The output field's shape and dtype: {3, H, W} (chw) or {H, W, 3} (hwc).
** Fills dtype, ndim and shape of *d; leaves d->name alone. */
void stoke__tf_field_desc(const stoke__tf_spec *spec, stoke_field_desc *d);

/* Bytes of one output sample. */
size_t stoke__tf_out_bytes(const stoke__tf_spec *spec);

/* What to do to one image.  Coordinates are full-resolution pixels. */
typedef struct stoke__tf_plan {
  double box_x, box_y;   /* the area that becomes the output: its corner */
  double box_w, box_h;   /* and size (fractional after a resize) */
  int clip_x0, clip_y0;  /* the pixels the filter may read: [x0, x1) x    */
  int clip_x1, clip_y1;  /* [y0, y1); the crop for a crop-then-resize, the */
                         /* whole image for a resize-then-crop (as PIL)    */
  int out_w, out_h;
  bool flip;             /* mirror the output horizontally */
} stoke__tf_plan;

/* Plan the transform of a w x h image, drawing from `rng` (the sample's
** stream; advanced).  Random-resized-crop draws as torchvision's
** RandomResizedCrop.get_params (up to 10 tries, then the central fallback),
** then the flip draws one uniform when flip_p > 0.  Returns 0, or
** STOKE_EINVAL when w or h < 1 or the image is smaller than a
** center-crop without resize (torchvision would pad; stoke does not).
** Thread-safe; rng belongs to the caller. */
int stoke__tf_plan_make(const stoke__tf_spec *spec, int w, int h,
                        stoke_rng *rng, stoke__tf_plan *out);

/* The largest DCT scale denominator d in {1, 2, 4, 8} for which the box,
** decoded at 1/d, still has at least the output's pixels in each axis: a
** decoder may decode at 1/d and lose no detail the output would keep. */
int stoke__tf_plan_dct_denom(const stoke__tf_plan *p);

/* The full-resolution pixels [win[0], win[2]) x [win[1], win[3]) that
** stoke__tf_apply reads when the image is decoded at 1/denom: the box
** widened by the filter's support and a pixel, aligned outward to
** multiples of denom, within the clip window (aligned likewise).  A decoder
** that decodes at least this region gets the same output as from the whole
** image.  win[2], win[3] may pass the image's edge by less than denom when
** its size is not a multiple of denom: clamp to the scaled image. */
void stoke__tf_plan_window(const stoke__tf_plan *p, int denom, int win[4]);

/* The decoded pixels handed to stoke__tf_apply: a region of the image,
** possibly downscaled.  Region pixel (i, j) covers full-resolution
** [x0 + i*scale, x0 + (i+1)*scale) x [y0 + j*scale, ...). */
typedef struct stoke__tf_image {
  const uint8_t *px; /* RGB8, borrowed for the call */
  int w, h;          /* region size in its own pixels */
  size_t stride;     /* bytes from one row to the next, >= 3 * w */
  double x0, y0;     /* full-res position of the region's top-left corner */
  double scale;      /* full-res pixels per region pixel: 1, 2, 4 or 8 */
} stoke__tf_image;

/* The kernels stoke__tf_apply may use, in order: each gives the same bytes
** as the scalar reference, faster. */
enum {
  STOKE__TF_ISA_SCALAR = 0, /* portable C: the reference */
  STOKE__TF_ISA_SSE41 = 1,  /* x86 SSE4.1 */
  STOKE__TF_ISA_AVX2 = 2    /* x86 AVX2 with FMA and F16C */
};

/* The best of the STOKE__TF_ISA_* that this CPU runs.  It asks the CPU
** (cpuid): once per scratch, not per sample.  Thread-safe. */
int stoke__tf_isa_best(void);

/* Per-worker scratch: coefficient tables, the intermediate image of the
** horizontal pass and the normalize lookup table.  Buffers only grow and
** are reused across samples; after the first few samples apply allocates
** nothing.  Owned by one worker; init before first use, free at the end
** (free of a zeroed scratch is a no-op). */
typedef struct stoke__tf_scratch {
  const stoke_allocator *alloc; /* borrowed; NULL = malloc/free */
  /* The kernels apply uses, STOKE__TF_ISA_*: init sets the best the CPU
  ** has; tests set a lower one to compare the paths (never a higher). */
  int isa;
  void *buf[5];                 /* see resample.c: grow-only buffers */
  size_t cap[5];                /* bytes of each */
  /* Normalize table: u8 -> output value per channel, built for lut_key. */
  float lut[3][256];
  uint16_t lut16[3][256];
  float lut_key[7];             /* mean, std, normalize: what lut is for */
  bool lut_ok;
  /* The same for the vector kernels: per channel mean, std and 1 / std
  ** (0, 1, 1 without normalize); whether they reproduce lut (bit 0) and
  ** lut16 (bit 1) exactly, -1 until checked. */
  float norm[3][3];
  int norm_exact;
} stoke__tf_scratch;

void stoke__tf_scratch_init(stoke__tf_scratch *s, const stoke_allocator *a);
void stoke__tf_scratch_free(stoke__tf_scratch *s);

/* Resample plan->box out of `img` to plan->out_w x out_h, flip if planned,
** and write stoke__tf_out_bytes(spec) bytes at dst in spec's layout and
** dtype.  The filter reads only region pixels inside the plan's clip
** window (mapped to region pixels, rounding outward) and inside the region.
** Returns 0, STOKE_ENOMEM (scratch could not grow), or STOKE_EINVAL when the
** region does not cover the box or the output size differs from the spec.
** dst must hold the bytes (any alignment).  Thread-safe with distinct
** scratch. */
int stoke__tf_apply(const stoke__tf_spec *spec, const stoke__tf_plan *plan,
                    const stoke__tf_image *img, stoke__tf_scratch *scratch,
                    void *dst);

/* The value of each u8 input per channel in spec's float output: x/255,
** then (x - mean) / std with normalize, as f32 and as f16 bits.  The one
** definition of the arithmetic: the host kernels reproduce it bit for bit
** (or use it), and the device normalisation (src/device/) looks its
** values up, so host and device outputs are the same bytes. */
void stoke__tf_norm_table(const stoke__tf_spec *spec, float lut[3][256],
                          uint16_t lut16[3][256]);

/* IEEE binary16 of f, rounding to nearest, ties to even (overflow to inf,
** NaN kept quiet). */
uint16_t stoke__tf_f16(float f);

#endif /* STOKE_TRANSFORM_H */
