/* fuzz_transform.c — the transform-spec parser (src/transform/spec.c) and
** what it feeds: the input up to its first NUL byte is the spec; the bytes
** after it give an image size and a seed.  Properties: a refused spec says
** so naming "transform"; an accepted one gives a consistent field; a plan's
** window lies inside the image, and resampling from just that window gives
** the same output bytes as from the whole image (transform.h's promise to
** the decoders). */
#include "fuzz.h"
#include "transform/transform.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t tn = nul ? (size_t)(nul - data) : size;
  char *text = malloc(tn + 1);
  FUZZ_ASSERT(text);
  memcpy(text, data, tn);
  text[tn] = 0;
  uint8_t opt[6] = {0};
  if (nul) memcpy(opt, nul + 1, STOKE__MIN(sizeof opt, size - tn - 1));
  stoke__tf_spec spec;
  int rc = stoke__tf_parse(text, &spec);
  free(text);
  if (rc != 0) {
    FUZZ_ASSERT(rc == STOKE_EINVAL);
    FUZZ_ASSERT(strstr(stoke__tls_error(), "transform") != NULL);
    return 0;
  }
  stoke_field_desc fd = {0};
  stoke__tf_field_desc(&spec, &fd);
  FUZZ_ASSERT(fd.ndim == 3 && spec.out_w > 0 && spec.out_h > 0);
  size_t bytes = stoke__tf_out_bytes(&spec);
  FUZZ_ASSERT(bytes == (size_t)spec.out_w * spec.out_h * 3 *
                           stoke_dtype_size(spec.dtype));
  int W = 1 + (opt[0] | opt[1] << 8) % 700, H = 1 + (opt[2] | opt[3] << 8) % 700;
  stoke_rng rng;
  stoke_rng_init(&rng, opt[4], opt[5], 7);
  stoke__tf_plan plan;
  if (stoke__tf_plan_make(&spec, W, H, &rng, &plan) != 0) return 0;
  FUZZ_ASSERT(plan.out_w == spec.out_w && plan.out_h == spec.out_h);
  FUZZ_ASSERT(plan.clip_x0 >= 0 && plan.clip_y0 >= 0 && plan.clip_x1 <= W &&
              plan.clip_y1 <= H);
  int denom = stoke__tf_plan_dct_denom(&plan);
  FUZZ_ASSERT(denom == 1 || denom == 2 || denom == 4 || denom == 8);
  int win[4];
  stoke__tf_plan_window(&plan, 1, win);
  FUZZ_ASSERT(win[0] >= 0 && win[1] >= 0 && win[0] < win[2] &&
              win[1] < win[3] && win[2] <= W && win[3] <= H);
  if ((size_t)plan.out_w * plan.out_h > 300 * 300) return 0; /* speed */
  /* The whole image, then only its window: the same bytes. */
  uint8_t *px = malloc((size_t)W * H * 3);
  FUZZ_ASSERT(px);
  for (size_t i = 0; i < (size_t)W * H * 3; i++)
    px[i] = (uint8_t)(i * 2654435761u >> 13);
  uint8_t *a = malloc(bytes), *b = malloc(bytes);
  FUZZ_ASSERT(a && b);
  stoke__tf_scratch sc;
  stoke__tf_scratch_init(&sc, NULL);
  stoke__tf_image whole = {px, W, H, (size_t)W * 3, 0, 0, 1};
  FUZZ_ASSERT(stoke__tf_apply(&spec, &plan, &whole, &sc, a) == 0);
  stoke__tf_image part = {px + ((size_t)win[1] * W + win[0]) * 3,
                          win[2] - win[0], win[3] - win[1], (size_t)W * 3,
                          win[0], win[1], 1};
  FUZZ_ASSERT(stoke__tf_apply(&spec, &plan, &part, &sc, b) == 0);
  FUZZ_ASSERT(memcmp(a, b, bytes) == 0);
  stoke__tf_scratch_free(&sc);
  free(px);
  free(a);
  free(b);
  return 0;
}
