/* demo_data.c — the built-in image dataset of `stoke demo`: synthesised
** JPEGs in an ImageFolder layout, written once into a cache directory and
** reused.  No network, no files shipped: each image is a smooth scene
** (gradients, discs, stripes) with sensor-like noise, sized and encoded like
** an ImageNet photo (~400x300, quality 90), so decoding it costs what a
** real one does. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

#define DEMO_CLASSES 8
#define DEMO_PER_CLASS 40

static uint64_t next_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int cli_mkdir_p(const char *path) {
  char buf[1200];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* One scene: class c sets the palette and the shapes, i the layout. */
static void paint(uint8_t *px, int w, int h, int c, int i) {
  uint64_t s = (uint64_t)c * 1000003u + (uint64_t)i;
  int cx = (int)(next_rand(&s) % (uint64_t)w);
  int cy = (int)(next_rand(&s) % (uint64_t)h);
  int r = 30 + (int)(next_rand(&s) % 90);
  int stripe = 6 + c * 3;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *q = px + 3 * ((size_t)y * (size_t)w + (size_t)x);
      int dx = x - cx, dy = y - cy;
      int in_disc = dx * dx + dy * dy < r * r;
      int band = ((x + y * (c % 3)) / stripe) & 1;
      int noise = (int)(next_rand(&s) & 31) - 16;
      int v0 = (x * 255) / w, v1 = (y * 255) / h;
      int rr = (c * 37 + v0 / 2 + (in_disc ? 90 : 0) + band * 25 + noise);
      int gg = (c * 71 + v1 / 2 + (in_disc ? 0 : 40) + noise);
      int bb = (c * 13 + (v0 + v1) / 4 + band * 60 + noise);
      q[0] = (uint8_t)(rr < 0 ? 0 : rr > 255 ? 255 : rr);
      q[1] = (uint8_t)(gg < 0 ? 0 : gg > 255 ? 255 : gg);
      q[2] = (uint8_t)(bb < 0 ? 0 : bb > 255 ? 255 : bb);
    }
}

static int write_jpeg(const char *path, const uint8_t *px, int w, int h) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * (size_t)w * 3);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return fclose(f) == 0 ? 0 : -1;
}

int cli_demo_dataset(const char *dir, FILE *log) {
  char marker[1100];
  snprintf(marker, sizeof marker, "%s/.complete", dir);
  struct stat st;
  if (stat(marker, &st) == 0) return 0; /* made by an earlier run */
  if (log) fprintf(log, "making the demo dataset in %s (once)...\n", dir);
  const int w_max = 480, h_max = 360;
  uint8_t *px = malloc((size_t)w_max * h_max * 3);
  if (!px) {
    cli_error("demo: out of memory");
    return -1;
  }
  for (int c = 0; c < DEMO_CLASSES; c++) {
    char cdir[1100];
    snprintf(cdir, sizeof cdir, "%s/class_%d", dir, c);
    if (cli_mkdir_p(cdir) != 0) {
      cli_error("demo: cannot create %s: %s", cdir, strerror(errno));
      free(px);
      return -1;
    }
    for (int i = 0; i < DEMO_PER_CLASS; i++) {
      int w = 360 + (i * 7) % 121, h = 270 + (i * 11) % 91;
      paint(px, w, h, c, i);
      char path[1200];
      snprintf(path, sizeof path, "%s/img_%03d.jpg", cdir, i);
      if (write_jpeg(path, px, w, h) != 0) {
        cli_error("demo: cannot write %s: %s", path, strerror(errno));
        free(px);
        return -1;
      }
    }
  }
  free(px);
  FILE *m = fopen(marker, "w");
  if (!m || fclose(m) != 0) {
    cli_error("demo: cannot write %s", marker);
    return -1;
  }
  return 0;
}
