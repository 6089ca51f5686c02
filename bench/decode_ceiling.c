/* decode_ceiling.c — the raw ceiling for the image benchmark: every file of
** a folder tree decoded at full scale to RGB with libjpeg-turbo, nothing
** else, on T threads.  A loader that crops, resizes and collates cannot be
** faster than this unless it decodes less (region and DCT-scaled decoding),
** which is what stoke must show.
**
**   cc -O2 -o decode_ceiling bench/decode_ceiling.c -ljpeg -lpthread
**   ./decode_ceiling CORPUS [THREADS] [PASSES]     prints one JSON object */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

typedef struct blob { unsigned char *data; size_t n; } blob;

static blob *files;
static size_t n_files, cap_files;
static atomic_size_t next_file;
static size_t total_jobs;

static void add_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  if (n_files == cap_files) {
    cap_files = cap_files ? 2 * cap_files : 1024;
    files = realloc(files, cap_files * sizeof *files);
  }
  blob *b = &files[n_files++];
  b->data = malloc((size_t)n);
  b->n = fread(b->data, 1, (size_t)n, f);
  fclose(f);
}

static void walk(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      walk(path);
    } else {
      size_t len = strlen(e->d_name);
      if (len > 4 && (strcasecmp(e->d_name + len - 4, ".jpg") == 0 ||
                      strcasecmp(e->d_name + len - 5, ".jpeg") == 0))
        add_file(path);
    }
  }
  closedir(d);
}

struct err_mgr { struct jpeg_error_mgr pub; jmp_buf jb; };
static void on_error(j_common_ptr c) { longjmp(((struct err_mgr *)c->err)->jb, 1); }

static void *worker(void *arg) {
  (void)arg;
  struct jpeg_decompress_struct d;
  struct err_mgr em;
  d.err = jpeg_std_error(&em.pub);
  em.pub.error_exit = on_error;
  jpeg_create_decompress(&d);
  unsigned char *rgb = NULL;
  size_t rgb_cap = 0;
  for (;;) {
    size_t k = atomic_fetch_add(&next_file, 1);
    if (k >= total_jobs) break;
    blob *b = &files[k % n_files];
    if (setjmp(em.jb)) { jpeg_abort_decompress(&d); continue; }
    jpeg_mem_src(&d, b->data, (unsigned long)b->n);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    size_t need = (size_t)d.output_width * d.output_height * 3;
    if (need > rgb_cap) { rgb = realloc(rgb, need); rgb_cap = need; }
    while (d.output_scanline < d.output_height) {
      JSAMPROW row = rgb + (size_t)d.output_scanline * d.output_width * 3;
      jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
  }
  jpeg_destroy_decompress(&d);
  free(rgb);
  return NULL;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double run(int threads, size_t jobs) {
  pthread_t tid[256];
  atomic_store(&next_file, 0);
  total_jobs = jobs;
  double t0 = now();
  for (int i = 0; i < threads; i++) pthread_create(&tid[i], NULL, worker, NULL);
  for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
  return now() - t0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: decode_ceiling CORPUS [THREADS] [PASSES]\n");
    return 2;
  }
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  int passes = argc > 3 ? atoi(argv[3]) : 1;
  if (threads < 1 || threads > 256 || passes < 1) return 2;
  walk(argv[1]);
  if (n_files == 0) {
    fprintf(stderr, "decode_ceiling: no .jpg files under %s\n", argv[1]);
    return 1;
  }
  run(threads, n_files); /* warm-up: one pass */
  size_t jobs = n_files * (size_t)passes;
  double s = run(threads, jobs);
  printf("{\"impl\": \"libjpeg-turbo full decode\", \"threads\": %d, "
         "\"images\": %zu, \"seconds\": %.4f, \"images_per_s\": %.1f, "
         "\"images_per_s_per_thread\": %.1f}\n",
         threads, jobs, s, jobs / s, jobs / s / threads);
  return 0;
}
