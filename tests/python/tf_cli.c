/* tf_cli.c — drives src/transform/ for test_transform_vs_torchvision.py.
**
**   tf_cli crop SPEC W H X Y CW CH   stdin: W*H*3 RGB8 bytes; stdout: the
**                                    output of SPEC (its size, layout and
**                                    dtype) for the fixed crop box, no flip
**   tf_cli plan-apply SPEC W H SEED  stdin/stdout as above; the box planned
**                                    by SPEC with the stream (SEED, 0, 0)
**   tf_cli plan SPEC W H SEED N      prints N planned boxes "x y w h flip",
**                                    sample i using the stream (SEED, 0, i)
**
** Built by the pytest against the static library; exits 1 with a message on
** stderr on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transform/transform.h"

static int die(const char *what) {
  fprintf(stderr, "tf_cli: %s: %s\n", what, stoke__tls_error());
  return 1;
}

static uint8_t *read_image(int w, int h) {
  size_t n = (size_t)w * (size_t)h * 3;
  uint8_t *px = malloc(n ? n : 1);
  if (!px || fread(px, 1, n, stdin) != n) {
    fprintf(stderr, "tf_cli: short image on stdin\n");
    exit(1);
  }
  return px;
}

static int apply_and_write(const stoke__tf_spec *spec,
                           const stoke__tf_plan *plan, const uint8_t *px,
                           int w, int h) {
  stoke__tf_image img = {.px = px, .w = w, .h = h, .stride = 3 * (size_t)w,
                         .scale = 1.0};
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  size_t n = stoke__tf_out_bytes(spec);
  void *out = malloc(n);
  if (!out) return 1;
  int rc = stoke__tf_apply(spec, plan, &img, &s, out);
  stoke__tf_scratch_free(&s);
  if (rc) return die("apply");
  fwrite(out, 1, n, stdout);
  free(out);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: tf_cli crop|plan|plan-apply SPEC W H ...\n");
    return 2;
  }
  stoke__tf_spec spec;
  if (stoke__tf_parse(argv[2], &spec)) return die("parse");
  int w = atoi(argv[3]), h = atoi(argv[4]);
  if (strcmp(argv[1], "crop") == 0 && argc == 9) {
    stoke__tf_plan p;
    memset(&p, 0, sizeof p);
    p.box_x = p.clip_x0 = atoi(argv[5]);
    p.box_y = p.clip_y0 = atoi(argv[6]);
    p.box_w = atoi(argv[7]);
    p.box_h = atoi(argv[8]);
    p.clip_x1 = p.clip_x0 + atoi(argv[7]);
    p.clip_y1 = p.clip_y0 + atoi(argv[8]);
    p.out_w = spec.out_w;
    p.out_h = spec.out_h;
    uint8_t *px = read_image(w, h);
    int rc = apply_and_write(&spec, &p, px, w, h);
    free(px);
    return rc;
  }
  if (strcmp(argv[1], "plan-apply") == 0 && argc == 6) {
    stoke_rng rng;
    stoke_rng_init(&rng, strtoull(argv[5], NULL, 10), 0, 0);
    stoke__tf_plan p;
    if (stoke__tf_plan_make(&spec, w, h, &rng, &p)) return die("plan");
    uint8_t *px = read_image(w, h);
    int rc = apply_and_write(&spec, &p, px, w, h);
    free(px);
    return rc;
  }
  if (strcmp(argv[1], "plan") == 0 && argc == 7) {
    uint64_t seed = strtoull(argv[5], NULL, 10);
    long n = atol(argv[6]);
    for (long i = 0; i < n; i++) {
      stoke_rng rng;
      stoke_rng_init(&rng, seed, 0, (uint64_t)i);
      stoke__tf_plan p;
      if (stoke__tf_plan_make(&spec, w, h, &rng, &p)) return die("plan");
      printf("%.17g %.17g %.17g %.17g %d\n", p.box_x, p.box_y, p.box_w,
             p.box_h, p.flip ? 1 : 0);
    }
    return 0;
  }
  fprintf(stderr, "tf_cli: bad arguments\n");
  return 2;
}
