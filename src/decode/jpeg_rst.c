/* jpeg_rst.c — cutting a crop out of a JPEG's entropy-coded data, using its
** restart markers, before libjpeg sees it.
**
** Why: in a baseline JPEG the Huffman-coded data is one bit stream, so a
** region decode (jpeg_crop_scanline / jpeg_skip_scanlines) still entropy-
** decodes every row above the crop and every column beside it, and on
** photographs entropy decoding is most of libjpeg-turbo's time.  A restart
** marker (RSTn) resets the bit stream and the DC predictors, so the data
** between two markers decodes on its own.  When the restart interval is R
** MCUs and every MCU row holds a whole number of intervals, each interval
** is a rectangle of the image, and the rectangles covering a crop,
** concatenated under a frame header that gives the smaller size, are a
** valid JPEG of just that part of the image, with the same DCT
** coefficients: decoding it gives the same pixels a full decode gives
** there, for the cost of the part only.  `stoke pack` writes every JPEG
** this way (jpeg_transcode.c); other files use it when they happen to
** have such markers.
**
** The stream built here: the original bytes up to the end of the SOS
** header, with the frame's height and width patched; then the chosen
** intervals' bytes, each but the last followed by RST0..7 in sequence
** (libjpeg checks the numbering); then EOI.  Anything unexpected (another
** marker inside the scan, a marker out of sequence, data ending early)
** makes the planner give up, and the caller decodes the original stream
** the ordinary way, which reports the error properly. */
#include "decode/decode_int.h"

#include <string.h>

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

bool stoke__jpeg_rst_parse(const uint8_t *p, size_t n, stoke__jpeg_rst *L) {
  memset(L, 0, sizeof *L);
  if (n < 4 || p[0] != 0xff || p[1] != 0xd8) return false;
  size_t i = 2;
  unsigned hmax = 0, vmax = 0, nf = 0;
  while (i + 4 <= n) {
    if (p[i] != 0xff) return false;
    uint8_t m = p[i + 1];
    if (m == 0xff) { /* fill byte before a marker */
      i++;
      continue;
    }
    size_t len = be16(p + i + 2);
    if (len < 2 || i + 2 + len > n) return false;
    const uint8_t *seg = p + i + 4; /* after the length */
    if (m == 0xc0 || m == 0xc1) {   /* baseline / extended, Huffman */
      if (L->sof_at || len < 8) return false;
      nf = seg[5];
      if (seg[0] != 8 || nf == 0 || nf > 4 || len != 8 + 3 * nf) return false;
      L->sof_at = i;
      L->height = be16(seg + 1);
      L->width = be16(seg + 3);
      for (unsigned c = 0; c < nf; c++) {
        unsigned hs = seg[7 + 3 * c] >> 4, vs = seg[7 + 3 * c] & 15;
        if (hs < 1 || hs > 4 || vs < 1 || vs > 4) return false;
        hmax = hs > hmax ? hs : hmax;
        vmax = vs > vmax ? vs : vmax;
      }
    } else if (m >= 0xc2 && m <= 0xcf && m != 0xc4 && m != 0xc8 &&
               m != 0xcc) {
      return false; /* progressive, lossless or arithmetic: one stream */
    } else if (m == 0xdd) {
      if (len != 4) return false;
      L->interval = be16(seg);
    } else if (m == 0xda) {
      /* The scan must hold every component (one interleaved scan) and be
      ** the only one: a second scan would follow this one's data. */
      if (!L->sof_at || len < 3 || seg[0] != nf) return false;
      L->scan_at = i + 2 + len;
      break;
    } else if (m == 0xd9 || (m >= 0xd0 && m <= 0xd7) || m == 0x01) {
      return false; /* no pixels before EOI, or a stray marker */
    }
    i += 2 + len;
  }
  if (!L->scan_at || !L->interval || L->width == 0 || L->height == 0)
    return false;
  /* One component: a non-interleaved scan, whose MCU is one 8x8 block. */
  L->mcu_w = nf == 1 ? 8 : 8 * hmax;
  L->mcu_h = nf == 1 ? 8 : 8 * vmax;
  L->mcus_x = (L->width + L->mcu_w - 1) / L->mcu_w;
  L->mcus_y = (L->height + L->mcu_h - 1) / L->mcu_h;
  if (L->mcus_x % L->interval != 0) return false; /* intervals wrap rows */
  L->seg_w = L->interval * L->mcu_w;
  L->segs_x = L->mcus_x / L->interval;
  return true;
}

/* The end of the restart interval that starts at p[i]: the offset of the
** 0xFF that begins the next marker (fill bytes included).  *marker gets
** the marker code; 0 when the data ran out. */
static size_t interval_end(const uint8_t *p, size_t n, size_t i,
                           uint8_t *marker) {
  for (;;) {
    const uint8_t *ff = memchr(p + i, 0xff, n - i);
    if (!ff) break;
    size_t at = (size_t)(ff - p), j = at + 1;
    while (j < n && p[j] == 0xff) j++; /* fill bytes */
    if (j >= n) break;
    if (p[j] != 0x00) {
      *marker = p[j];
      return at;
    }
    i = j + 1; /* a stuffed 0xFF data byte */
  }
  *marker = 0;
  return n;
}

bool stoke__jpeg_rst_cut(const stoke__jpeg_rst *L, const uint8_t *p,
                         size_t n, const stoke__jpeg_rst_box *box,
                         uint8_t *out, size_t cap, size_t *out_n) {
  uint32_t first = box->seg_y0 * L->segs_x;
  uint32_t last = (box->seg_y1 - 1) * L->segs_x + box->seg_x1 - 1;
  uint32_t per_row = box->seg_x1 - box->seg_x0;
  if (cap < stoke__jpeg_rst_cut_bound(n, box)) return false;

  memcpy(out, p, L->scan_at);
  uint32_t h = STOKE__MIN(box->seg_y1 * L->mcu_h, L->height) -
               box->seg_y0 * L->mcu_h;
  uint32_t w = STOKE__MIN(box->seg_x1 * L->seg_w, L->width) -
               box->seg_x0 * L->seg_w;
  uint8_t *sof = out + L->sof_at + 5; /* FF Cn Lh Ll P | Yh Yl Xh Xl */
  sof[0] = (uint8_t)(h >> 8);
  sof[1] = (uint8_t)h;
  sof[2] = (uint8_t)(w >> 8);
  sof[3] = (uint8_t)w;
  size_t o = L->scan_at, i = L->scan_at;
  uint32_t written = 0;
  for (uint32_t k = 0; k <= last; k++) {
    uint8_t marker;
    size_t end = interval_end(p, n, i, &marker);
    /* Every interval but the image's last ends at RST(k mod 8). */
    bool rst = marker >= 0xd0 && marker <= 0xd7;
    if (rst ? marker != 0xd0 + (k & 7)
            : !(marker == 0xd9 && k + 1 == L->mcus_y * L->segs_x))
      return false;
    uint32_t col = k % L->segs_x;
    if (k >= first && col >= box->seg_x0 && col < box->seg_x1) {
      memcpy(out + o, p + i, end - i);
      o += end - i;
      if (++written < per_row * (box->seg_y1 - box->seg_y0)) {
        out[o++] = 0xff;
        out[o++] = (uint8_t)(0xd0 + ((written - 1) & 7));
      }
    }
    if (!rst) break;
    i = end;
    while (p[i] == 0xff) i++; /* the marker's fill bytes */
    i++;                      /* its code */
  }
  out[o++] = 0xff;
  out[o++] = 0xd9;
  *out_n = o;
  return true;
}

size_t stoke__jpeg_rst_cut_bound(size_t n, const stoke__jpeg_rst_box *box) {
  size_t segs = (size_t)(box->seg_x1 - box->seg_x0) *
                (box->seg_y1 - box->seg_y0);
  return n + 2 * segs + 2; /* the file at most, a marker each, an EOI */
}

void stoke__jpeg_rst_box_for(const stoke__jpeg_rst *L, uint32_t x0,
                             uint32_t y0, uint32_t x1, uint32_t y1,
                             stoke__jpeg_rst_box *box) {
  box->seg_x0 = x0 / L->seg_w;
  box->seg_x1 = (x1 + L->seg_w - 1) / L->seg_w;
  box->seg_y0 = y0 / L->mcu_h;
  box->seg_y1 = (y1 + L->mcu_h - 1) / L->mcu_h;
  box->x = box->seg_x0 * L->seg_w;
  box->y = box->seg_y0 * L->mcu_h;
  box->w = STOKE__MIN(box->seg_x1 * L->seg_w, L->width) - box->x;
  box->h = STOKE__MIN(box->seg_y1 * L->mcu_h, L->height) - box->y;
}
