/* test_blob_folder.c — the ImageFolder blobset (src/storage/imagefolder.c)
** and the shared helpers of blob.c (CRC-32, the reader).
**
** Fixtures are built in a mkdtemp folder by each test and removed at the
** end; image files are a few fake bytes behind real JPEG / PNG magic. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/blob.h"
#include "blob_fixtures.h"
#include "test_util.h"

static char errbuf[1024];

/* mkdir -p of path's folder, then write the file. */
static void put_file(const char *root, const char *rel, const void *bytes,
                     size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(root) + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(path, 0755);
      *p = '/';
    }
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(bytes, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* A fake image: the format's magic, then the name (so bytes identify it). */
static void put_image(const char *root, const char *rel) {
  uint8_t b[512];
  size_t n = 0;
  const char *dot = strrchr(rel, '.');
  if (dot && (dot[1] == 'p' || dot[1] == 'P')) {
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a,
                                   0x0a};
    memcpy(b, png, 8);
    n = 8;
  } else {
    b[0] = 0xff;
    b[1] = 0xd8;
    b[2] = 0xff;
    n = 3;
  }
  size_t k = strlen(rel);
  memcpy(b + n, rel, k);
  put_file(root, rel, b, n + k);
}

static void put_dir(const char *root, const char *rel) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  assert_int_equal(mkdir(path, 0755), 0);
}

static void test_crc32(void **state) {
  (void)state;
  /* The standard check value of CRC-32/IEEE. */
  assert_int_equal(stoke__crc32(0, "123456789", 9), 0xcbf43926u);
  assert_int_equal(stoke__crc32(0, "", 0), 0);
  /* Incremental equals one-shot. */
  uint32_t c = stoke__crc32(0, "12345", 5);
  assert_int_equal(stoke__crc32(c, "6789", 4), 0xcbf43926u);
}

static const char *const cat_order[] = {
    "cat/a.JPG",        "cat/b.jpg",    "cat/c.png",
    "cat/sub/z.jpeg",   "cat/sub-b/y.jpg", "cat/sub/deep/w.jpg",
};
static const char *const dog_order[] = {"dog/10.jpg", "dog/9.jpg",
                                        "dog/B.jpeg", "dog/a.Png"};

static void build_tree(const char *root) {
  /* Written out of order on purpose. */
  put_image(root, "cat/sub/deep/w.jpg");
  put_image(root, "cat/c.png");
  put_image(root, "cat/b.jpg");
  put_image(root, "cat/a.JPG");
  put_image(root, "cat/sub-b/y.jpg");
  put_image(root, "cat/sub/z.jpeg");
  put_file(root, "cat/notes.txt", "hello", 5);
  put_image(root, "cat/x.webp");
  put_image(root, "cat/.hidden.jpg");
  put_image(root, "dog/a.Png");
  put_image(root, "dog/9.jpg");
  put_image(root, "dog/B.jpeg");
  put_image(root, "dog/10.jpg");
  put_image(root, "dog/photo.BMP");
  put_file(root, "README.md", "# data", 6);
  put_image(root, ".git/objects/x.jpg"); /* a hidden folder: not a class */
}

static void expect_sample(stoke__blobset *s, stoke__blob_reader *r,
                          const char *root, size_t i, const char *rel,
                          int64_t label) {
  char want[4096], got[4096];
  snprintf(want, sizeof want, "%s/%s", root, rel);
  stoke__blobset_describe(s, i, got, sizeof got);
  assert_string_equal(got, want);
  assert_int_equal(stoke__blobset_label(s, i), label);
  const char *dot = strrchr(rel, '.');
  int fmt = (dot[1] == 'p' || dot[1] == 'P') ? STOKE__BLOB_PNG
                                             : STOKE__BLOB_JPEG;
  assert_int_equal(stoke__blobset_format(s, i), fmt);
  const uint8_t *p;
  size_t n;
  int rc = stoke__blobset_read(s, i, r, &p, &n, errbuf, sizeof errbuf);
  if (rc) fail_msg("read %zu: %s", i, errbuf);
  size_t magic = fmt == STOKE__BLOB_PNG ? 8 : 3;
  assert_int_equal(n, magic + strlen(rel));
  assert_memory_equal(p + magic, rel, strlen(rel));
  assert_int_equal(p[0], fmt == STOKE__BLOB_PNG ? 0x89 : 0xff);
}

static void test_folder_order_labels_skips(void **state) {
  (void)state;
  char *root = make_tmp();
  build_tree(root);
  stoke__blobset *s = NULL;
  int rc = stoke__blobset_open_folder(root, NULL, NULL, &s, errbuf, sizeof errbuf);
  if (rc) fail_msg("open: %s", errbuf);
  assert_string_equal(stoke__blobset_kind(s), "folder");
  assert_int_equal(stoke__blobset_n_classes(s), 2);
  assert_string_equal(stoke__blobset_class_name(s, 0), "cat");
  assert_string_equal(stoke__blobset_class_name(s, 1), "dog");
  assert_null(stoke__blobset_class_name(s, 2));
  assert_int_equal(stoke__blobset_n_samples(s), 10);

  stoke__blob_reader r;
  stoke__blob_reader_init(&r, NULL);
  size_t i = 0;
  for (size_t k = 0; k < 6; k++, i++)
    expect_sample(s, &r, root, i, cat_order[k], 0);
  for (size_t k = 0; k < 4; k++, i++)
    expect_sample(s, &r, root, i, dog_order[k], 1);
  uint32_t w, h;
  stoke__blobset_dims(s, 0, &w, &h);
  assert_int_equal(w, 0);
  assert_int_equal(h, 0);

  /* Skipped, sorted by path, each with its reason; hidden names are not
  ** even listed. */
  assert_int_equal(stoke__blobset_n_skipped(s), 4);
  const char *why;
  assert_string_equal(stoke__blobset_skipped(s, 0, &why), "README.md");
  assert_string_equal(why, "not in a class folder");
  assert_string_equal(stoke__blobset_skipped(s, 1, &why), "cat/notes.txt");
  assert_non_null(strstr(why, "not an image"));
  assert_string_equal(stoke__blobset_skipped(s, 2, &why), "cat/x.webp");
  assert_string_equal(why, "unsupported image format .webp");
  assert_string_equal(stoke__blobset_skipped(s, 3, &why), "dog/photo.BMP");
  assert_string_equal(why, "unsupported image format .BMP");
  assert_null(stoke__blobset_skipped(s, 4, &why));

  /* Out of range, no reader, and a file removed after open. */
  const uint8_t *p;
  size_t n;
  assert_int_equal(stoke__blobset_read(s, 0, NULL, &p, &n, errbuf,
                                       sizeof errbuf), STOKE_EINVAL);
  assert_int_equal(stoke__blobset_read(s, 10, &r, &p, &n, errbuf,
                                       sizeof errbuf), STOKE_EINVAL);
  char path[4096];
  snprintf(path, sizeof path, "%s/dog/9.jpg", root);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(stoke__blobset_read(s, 7, &r, &p, &n, errbuf,
                                       sizeof errbuf), STOKE_EIO);
  assert_non_null(strstr(errbuf, "dog/9.jpg"));
  assert_non_null(strstr(errbuf, "sample 7"));

  stoke__blob_reader_free(&r);
  stoke__blobset_close(s);
  stoke__blobset_close(NULL);
  rm_rf(root);
  free(root);
}

static void test_folder_empty_class(void **state) {
  (void)state;
  char *root = make_tmp();
  put_image(root, "ant/1.jpg");
  put_file(root, "bee/readme.txt", "x", 1);
  put_image(root, "bee/.x.jpg");
  stoke__blobset *s = (stoke__blobset *)1;
  assert_int_equal(stoke__blobset_open_folder(root, NULL, NULL, &s, errbuf,
                                              sizeof errbuf),
                   STOKE_EFORMAT);
  assert_null(s);
  assert_non_null(strstr(errbuf, "/bee"));
  assert_non_null(strstr(errbuf, "class 1"));
  assert_non_null(strstr(errbuf, "bee/readme.txt"));

  /* A class folder with nothing in it at all. */
  char *root2 = make_tmp();
  put_image(root2, "ant/1.png");
  put_dir(root2, "cow");
  assert_int_equal(stoke__blobset_open_folder(root2, NULL, NULL, &s, errbuf,
                                              sizeof errbuf),
                   STOKE_EFORMAT);
  assert_non_null(strstr(errbuf, "/cow"));
  assert_non_null(strstr(errbuf, "no image file"));

  /* No class folder; a root that does not exist. */
  char *root3 = make_tmp();
  put_image(root3, "loose.jpg");
  assert_int_equal(stoke__blobset_open_folder(root3, NULL, NULL, &s, errbuf,
                                              sizeof errbuf),
                   STOKE_EFORMAT);
  assert_non_null(strstr(errbuf, "no class folder"));
  char missing[4096];
  snprintf(missing, sizeof missing, "%s/nope", root3);
  assert_int_equal(stoke__blobset_open_folder(missing, NULL, NULL, &s, errbuf,
                                              sizeof errbuf),
                   STOKE_EIO);
  assert_non_null(strstr(errbuf, "nope"));

  /* A trailing slash on root is not doubled in descriptions. */
  char slash[4096];
  snprintf(slash, sizeof slash, "%s/", root2);
  rm_rf(root2);
  mkdir(root2, 0755);
  put_image(root2, "ant/1.png");
  int rc = stoke__blobset_open_folder(slash, NULL, NULL, &s, errbuf, sizeof errbuf);
  if (rc) fail_msg("open: %s", errbuf);
  char d[4096], want[4096];
  stoke__blobset_describe(s, 0, d, sizeof d);
  snprintf(want, sizeof want, "%s/ant/1.png", root2);
  assert_string_equal(d, want);
  stoke__blobset_close(s);

  rm_rf(root);
  rm_rf(root2);
  rm_rf(root3);
  free(root);
  free(root2);
  free(root3);
}

/* A counting allocator: the reader and the blobset free all they take. */
typedef struct counting {
  long live;
} counting;
static void *c_alloc(void *u, size_t n) {
  ((counting *)u)->live++;
  return malloc(n);
}
static void c_free(void *u, void *p) {
  ((counting *)u)->live--;
  free(p);
}

static void test_folder_allocator(void **state) {
  (void)state;
  char *root = make_tmp();
  build_tree(root);
  counting c = {0};
  stoke_allocator a = {c_alloc, c_free, &c};
  stoke__blobset *s = NULL;
  int rc = stoke__blobset_open_folder(root, &a, NULL, &s, errbuf, sizeof errbuf);
  if (rc) fail_msg("open: %s", errbuf);
  stoke__blob_reader r;
  stoke__blob_reader_init(&r, &a);
  for (size_t i = 0; i < stoke__blobset_n_samples(s); i++) {
    const uint8_t *p;
    size_t n;
    assert_int_equal(stoke__blobset_read(s, i, &r, &p, &n, errbuf,
                                         sizeof errbuf), 0);
  }
  assert_true(c.live > 0);
  stoke__blob_reader_free(&r);
  stoke__blobset_close(s);
  assert_int_equal(c.live, 0);
  rm_rf(root);
  free(root);
}



/* Every allocation failure is STOKE_ENOMEM, leaves *out NULL and leaks
** nothing (live returns to 0; LeakSanitizer checks malloc too). */
static void test_folder_oom(void **state) {
  (void)state;
  char *root = make_tmp();
  build_tree(root);
  for (long k = 1;; k++) {
    failing f = {.fail_at = k};
    stoke_allocator a = {f_alloc, f_free, &f};
    stoke__blobset *s = (stoke__blobset *)1;
    int rc = stoke__blobset_open_folder(root, &a, NULL, &s, errbuf, sizeof errbuf);
    if (f.faults == 0) {
      assert_int_equal(rc, 0);
      stoke__blobset_close(s);
      assert_int_equal(f.live, 0);
      assert_true(k > 10);
      break;
    }
    if (rc == 0) {
      stoke__blobset_close(s); /* the failure hit nothing fatal */
    } else {
      assert_int_equal(rc, STOKE_ENOMEM);
      assert_null(s);
      assert_non_null(strstr(errbuf, "out of memory"));
    }
    assert_int_equal(f.live, 0);
  }
  rm_rf(root);
  free(root);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc32),
      cmocka_unit_test(test_folder_order_labels_skips),
      cmocka_unit_test(test_folder_empty_class),
      cmocka_unit_test(test_folder_allocator),
      cmocka_unit_test(test_folder_oom),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
