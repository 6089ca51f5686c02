/* decode_fixtures.h — images made in the test itself for test_decode.c
** (header-only; no binary fixtures in the tree).
**
**  - df_pattern: a deterministic RGB image with gradients, edges and
**    noise, so that JPEG has real work and crops have something to see.
**  - df_jpeg: encode with libjpeg (RGB, gray, CMYK, YCCK; baseline or
**    progressive; chroma subsampling) into malloc'ed memory.
**  - df_ref_jpeg: a plain libjpeg decode of the whole image to RGB at
**    scale 1/s, the reference that region decodes must match exactly.
**  - df_png: encode with libspng's encoder.
**  - df_crc32 / df_png_fix_crc: patch PNG chunks and keep them valid.
**  - df_counting: a stoke_allocator that counts, remembers the largest
**    request, refuses anything over a cap, and can fail the n-th call.
*/
#ifndef STOKE_DECODE_FIXTURES_H
#define STOKE_DECODE_FIXTURES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <spng.h>

#include "stoke.h"

/* ---- pixels -------------------------------------------------------------- */

static inline uint64_t df_rng(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* w*h*3 bytes, malloc'ed. */
static inline uint8_t *df_pattern(uint32_t w, uint32_t h, uint64_t seed) {
  uint8_t *p = malloc((size_t)w * h * 3 + 1);
  uint64_t s = seed;
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++) {
      uint8_t *q = p + ((size_t)y * w + x) * 3;
      unsigned noise = (unsigned)(df_rng(&s) & 15);
      q[0] = (uint8_t)((x * 255u) / (w > 1 ? w - 1 : 1));
      q[1] = (uint8_t)((y * 255u) / (h > 1 ? h - 1 : 1));
      q[2] = (uint8_t)((((x / 16) ^ (y / 16)) & 1 ? 200 : 40) + noise);
    }
  return p;
}

/* ---- JPEG ---------------------------------------------------------------- */

typedef struct df_jpeg_opts {
  J_COLOR_SPACE in;     /* JCS_RGB, JCS_GRAYSCALE or JCS_CMYK */
  J_COLOR_SPACE store;  /* JCS_UNKNOWN = libjpeg's default for `in`; or
                           JCS_YCCK for CMYK input */
  int quality;
  int progressive;
  int h_samp, v_samp;   /* luma sampling factors: 2,2 = 4:2:0; 1,1 = 4:4:4 */
  unsigned restart;     /* a restart marker every this many MCUs; 0 none */
} df_jpeg_opts;

/* Encode pixels (w*h*components of `in`) into *out (free()). */
static inline void df_jpeg(const uint8_t *px, uint32_t w, uint32_t h,
                           const df_jpeg_opts *o, uint8_t **out, size_t *n) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  unsigned char *buf = NULL;
  unsigned long len = 0;
  jpeg_mem_dest(&c, &buf, &len);
  c.image_width = w;
  c.image_height = h;
  c.in_color_space = o->in;
  c.input_components = o->in == JCS_GRAYSCALE ? 1 : o->in == JCS_CMYK ? 4
                                                                      : 3;
  jpeg_set_defaults(&c);
  if (o->store != JCS_UNKNOWN) jpeg_set_colorspace(&c, o->store);
  jpeg_set_quality(&c, o->quality ? o->quality : 90, TRUE);
  if (o->h_samp && c.num_components >= 3) {
    c.comp_info[0].h_samp_factor = o->h_samp;
    c.comp_info[0].v_samp_factor = o->v_samp;
  }
  if (o->progressive) jpeg_simple_progression(&c);
  c.restart_interval = o->restart;
  jpeg_start_compress(&c, TRUE);
  size_t stride = (size_t)w * (size_t)c.input_components;
  while (c.next_scanline < h) {
    JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * stride);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  *out = buf;
  *n = len;
}

static inline void df_jpeg_rgb(const uint8_t *px, uint32_t w, uint32_t h,
                               int progressive, uint8_t **out, size_t *n) {
  df_jpeg_opts o = {JCS_RGB, JCS_UNKNOWN, 90, progressive, 2, 2, 0};
  df_jpeg(px, w, h, &o, out, n);
}

/* Plain libjpeg: whole image, RGB, scale 1/s.  *w, *h get the scaled size;
** the result is malloc'ed.  Only for good files (errors exit()). */
static inline uint8_t *df_ref_jpeg(const uint8_t *data, size_t n, unsigned s,
                                   uint32_t *w, uint32_t *h) {
  struct jpeg_decompress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, data, (unsigned long)n);
  jpeg_read_header(&c, TRUE);
  c.out_color_space = JCS_EXT_RGB;
  c.scale_num = 1;
  c.scale_denom = s;
  jpeg_start_decompress(&c);
  *w = c.output_width;
  *h = c.output_height;
  size_t stride = (size_t)c.output_width * 3;
  uint8_t *px = malloc(stride * c.output_height + 1);
  while (c.output_scanline < c.output_height) {
    JSAMPROW row = px + (size_t)c.output_scanline * stride;
    jpeg_read_scanlines(&c, &row, 1);
  }
  jpeg_finish_decompress(&c);
  jpeg_destroy_decompress(&c);
  return px;
}

/* Offset of the first byte of entropy-coded data (after the first SOS
** segment), or 0. */
static inline size_t df_jpeg_scan_start(const uint8_t *p, size_t n) {
  size_t i = 2;
  while (i + 4 <= n) {
    if (p[i] != 0xff) return 0;
    uint8_t m = p[i + 1];
    size_t len = (size_t)p[i + 2] << 8 | p[i + 3];
    if (m == 0xda) return i + 2 + len;
    i += 2 + len;
  }
  return 0;
}

/* Offset of the SOFn marker (0xff byte), or 0. */
static inline size_t df_jpeg_sof(const uint8_t *p, size_t n) {
  size_t i = 2;
  while (i + 4 <= n) {
    if (p[i] != 0xff) return 0;
    uint8_t m = p[i + 1];
    if (m >= 0xc0 && m <= 0xc2) return i;
    i += 2 + ((size_t)p[i + 2] << 8 | p[i + 3]);
  }
  return 0;
}

/* ---- PNG ----------------------------------------------------------------- */

/* Encode an image already in the PNG's own layout (SPNG_FMT_PNG: samples
** host-endian) into *out (free()).  plte/trns may be NULL.  Returns the
** spng error (0 = ok). */
static inline int df_png(const void *px, size_t px_len, uint32_t w,
                         uint32_t h, uint8_t color_type, uint8_t depth,
                         uint8_t interlace, struct spng_plte *plte,
                         struct spng_trns *trns, uint8_t **out, size_t *n) {
  spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  struct spng_ihdr ih = {0};
  ih.width = w;
  ih.height = h;
  ih.bit_depth = depth;
  ih.color_type = color_type;
  ih.interlace_method = interlace;
  int e = spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  if (!e) e = spng_set_ihdr(ctx, &ih);
  if (!e && plte) e = spng_set_plte(ctx, plte);
  if (!e && trns) e = spng_set_trns(ctx, trns);
  if (!e)
    e = spng_encode_image(ctx, px, px_len, SPNG_FMT_PNG,
                          SPNG_ENCODE_FINALIZE);
  *out = NULL;
  *n = 0;
  if (!e) {
    int err = 0;
    *out = spng_get_png_buffer(ctx, n, &err);
    e = err;
  }
  spng_ctx_free(ctx);
  return e;
}

static inline uint32_t df_crc32(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return ~c;
}

static inline uint32_t df_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

static inline void df_put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* Offset of the chunk `type` (its length field), or 0. */
static inline size_t df_png_chunk(const uint8_t *p, size_t n,
                                  const char *type) {
  size_t i = 8;
  while (i + 12 <= n) {
    uint32_t len = df_be32(p + i);
    if (memcmp(p + i + 4, type, 4) == 0) return i;
    i += 12 + (size_t)len;
  }
  return 0;
}

/* Recompute the CRC of the chunk at offset i. */
static inline void df_png_fix_crc(uint8_t *p, size_t i) {
  uint32_t len = df_be32(p + i);
  df_put_be32(p + i + 8 + len, df_crc32(p + i + 4, 4 + (size_t)len));
}

/* ---- counting allocator -------------------------------------------------- */

typedef struct df_counting {
  size_t n_calls, largest, refuse_over;
  size_t fail_at;   /* fail the fail_at-th call (1-based); 0 = never */
  size_t live;
} df_counting;

static inline void *df_counting_alloc(void *user, size_t n) {
  df_counting *c = user;
  c->n_calls++;
  if (n > c->largest) c->largest = n;
  if (c->refuse_over && n > c->refuse_over) return NULL;
  if (c->fail_at && c->n_calls == c->fail_at) return NULL;
  void *p = malloc(n);
  if (p) c->live++;
  return p;
}

static inline void df_counting_free(void *user, void *p) {
  df_counting *c = user;
  c->live--;
  free(p);
}

#endif /* STOKE_DECODE_FIXTURES_H */
