/* cmd_pack.c — "stoke pack SRC -o OUT": an ImageFolder directory or tar
** shards into packed shards (docs/packed-format.md), streaming, with a
** progress bar on a terminal and plain progress lines otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

const char cmd_pack_usage[] =
    "usage: stoke pack SRC -o OUT [--shard-size 256MB] [--keep-bytes]\n"
    "                  [--max-side N [--quality Q]] [-j N]\n"
    "\n"
    "Write the images of SRC (an ImageFolder directory, tar shards: a path,\n"
    "a pattern such as train-{0000..0099}.tar or a glob; or packed shards,\n"
    "to rewrite or re-shard them) into packed shards OUT-00000.stoke,\n"
    "OUT-00001.stoke, ... for random access by mmap.\n"
    "Every image's header is checked on the way; a broken file stops the\n"
    "pack, naming it, and leaves no shard behind.  An ImageFolder's class\n"
    "names are stored in every shard.\n"
    "\n"
    "JPEGs are rewritten losslessly on the way: the same DCT coefficients\n"
    "(so the same pixels), one baseline scan, a restart marker every 16\n"
    "pixels and optimised Huffman tables, so that a random crop decodes from\n"
    "the part of the file that covers it only.  CMYK JPEGs, PNGs and files\n"
    "the rewrite cannot read are stored as they are.\n"
    "\n"
    "  -o, --output OUT       prefix of the shards (required)\n"
    "  --shard-size SIZE      target size of a shard (256MB); 0 = one shard\n"
    "  --keep-bytes           store every file byte for byte (no rewrite)\n"
    "  --max-side N           resize images whose longer side is over N to N\n"
    "                         (lossy: decoded, resized with the transforms'\n"
    "                         antialiased filter, stored as JPEGs with\n"
    "                         restart cuts); smaller ones are kept as they\n"
    "                         are; the shards record N and the quality\n"
    "  --quality Q            JPEG quality of the resized images, 1..100 (90)\n"
    "  -j, --threads N        threads reading and rewriting (all cores)\n"
    "  --json FILE            write the summary as JSON ('-' = stdout)\n"
    "  -q, --quiet            no progress and no summary\n";

enum { O_OUT = 1, O_SHARD, O_KEEP, O_THREADS, O_JSON, O_QUIET, O_HELP,
       O_MAX_SIDE, O_QUALITY };

static const cli_opt pack_opts[] = {{"output", 'o', 1, O_OUT},
                                    {"shard-size", 0, 1, O_SHARD},
                                    {"keep-bytes", 0, 0, O_KEEP},
                                    {"threads", 'j', 1, O_THREADS},
                                    {"json", 0, 1, O_JSON},
                                    {"quiet", 'q', 0, O_QUIET},
                                    {"help", 'h', 0, O_HELP},
                                    {"max-side", 0, 1, O_MAX_SIDE},
                                    {"quality", 0, 1, O_QUALITY},
                                    {NULL, 0, 0, 0}};

static int on_progress(void *user, size_t done, size_t total, uint64_t bytes) {
  char mb[32];
  snprintf(mb, sizeof mb, "%.1f MB", (double)bytes / 1e6);
  cli_progress_show(user, done, total, mb, NULL);
  return 0;
}

int cmd_pack(int argc, char **argv) {
  const char *src_path = NULL, *out = NULL, *json_path = NULL;
  stoke_pack_config cfg;
  stoke_pack_config_init(&cfg);
  int quiet = 0, quality_given = 0;
  cli_parser p;
  cli_parser_init(&p, argc, argv, "pack");
  const char *v;
  int id;
  while ((id = cli_next_opt(&p, pack_opts, &v)) != CLI_OPT_END) {
    switch (id) {
    case CLI_OPT_ERROR:
      return CLI_USAGE;
    case CLI_OPT_ARG:
      if (src_path) {
        cli_error("pack: one source only, got '%s' and '%s'", src_path, v);
        return CLI_USAGE;
      }
      src_path = v;
      break;
    case O_HELP:
      fputs(cmd_pack_usage, stdout);
      return CLI_OK;
    case O_OUT:
      out = v;
      break;
    case O_SHARD:
      if (cli_parse_bytes(p.flag, v, &cfg.shard_bytes) != 0)
        return CLI_USAGE;
      break;
    case O_KEEP:
      cfg.keep_bytes = 1;
      break;
    case O_MAX_SIDE:
      if (cli_parse_uint(p.flag, v, 1, 65535, &cfg.max_side) != 0)
        return CLI_USAGE;
      break;
    case O_QUALITY: {
      unsigned q;
      if (cli_parse_uint(p.flag, v, 1, 100, &q) != 0) return CLI_USAGE;
      cfg.quality = (int)q;
      quality_given = 1;
      break;
    }
    case O_THREADS:
      if (cli_parse_uint(p.flag, v, 1, 1024, &cfg.n_threads) != 0)
        return CLI_USAGE;
      break;
    case O_JSON:
      json_path = v;
      break;
    case O_QUIET:
      quiet = 1;
      break;
    }
  }
  if (!src_path || !out) {
    cli_error("pack: needs a source and -o OUT; see 'stoke help pack'");
    return CLI_USAGE;
  }
  if (quality_given && !cfg.max_side) {
    cli_error("--quality: needs --max-side (the lossless rewrite has no "
              "quality)");
    return CLI_USAGE;
  }
  if (cfg.max_side && cfg.keep_bytes) {
    cli_error("--max-side: resizes, --keep-bytes keeps every byte: not both");
    return CLI_USAGE;
  }
  stoke_source *src = NULL;
  if (stoke_source_create_images(src_path, NULL, &src) != 0) {
    cli_error("%s", stoke_errmsg(NULL));
    return CLI_ERROR;
  }
  FILE *json = NULL;
  if (json_path && !(json = cli_open_output(json_path))) {
    stoke_source_destroy(src);
    return CLI_ERROR;
  }
  /* The shards' folder is made if missing, as `mkdir -p`. */
  const char *slash = strrchr(out, '/');
  if (slash && slash != out) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - out), out);
    if (cli_mkdir_p(dir) != 0) {
      cli_error("pack: cannot create %s: %s", dir, strerror(errno));
      stoke_source_destroy(src);
      if (json && json != stdout) fclose(json);
      return CLI_ERROR;
    }
  }
  cli_progress pr;
  cli_progress_init(&pr, quiet ? NULL : stderr, "pack");
  stoke_pack_result res;
  cfg.progress = on_progress;
  cfg.user = &pr;
  int rc = stoke_pack(src, out, &cfg, &res);
  if (rc != 0) {
    cli_error("%s", stoke_errmsg(NULL));
    stoke_source_destroy(src);
    if (json && json != stdout) fclose(json);
    return CLI_ERROR;
  }
  double secs = cli_now_s() - pr.t0;
  size_t n_classes = stoke_source_n_classes(src), n_skip =
      stoke_source_n_skipped(src);
  FILE *f = json == stdout ? stderr : stdout;
  char shown[1024]; /* a URL without its user-info and query */
  stoke_path_shown(src_path, shown, sizeof shown);
  if (!quiet) {
    fprintf(f, "packed %zu images in %zu classes from %s (%s) into %zu "
               "shard%s (%s...), %.1f MB in %.1f s\n",
            res.n_samples, n_classes, shown, stoke_source_kind(src),
            res.n_shards, res.n_shards == 1 ? "" : "s", res.first_shard,
            (double)res.bytes / 1e6, secs);
    if (res.n_resized)
      fprintf(f, "resized %zu images to a longer side of %u px (JPEG "
                 "quality %d): %.1f MB in, %.1f MB out\n",
              res.n_resized, cfg.max_side, cfg.quality,
              (double)res.bytes_in / 1e6, (double)res.bytes / 1e6);
    if (res.n_rewritten)
      fprintf(f, "rewrote %zu JPEGs for crop decoding: %.1f MB in, %.1f MB "
                 "out\n", res.n_rewritten, (double)res.bytes_in / 1e6,
              (double)res.bytes / 1e6);
    if (res.n_ready)
      fprintf(f, "%zu JPEGs had restart markers every 16 px already; "
                 "stored as they were\n", res.n_ready);
    if (res.n_kept)
      fprintf(f, "kept %zu JPEGs as they were; the first: %s\n",
              res.n_kept, res.first_kept);
    if (res.n_stale_removed)
      fprintf(f, "removed %zu shard%s an earlier pack left under %s past "
                 "the last one written\n",
              res.n_stale_removed, res.n_stale_removed == 1 ? "" : "s",
              out);
    if (n_skip) fprintf(f, "skipped %zu files:\n", n_skip);
    for (size_t k = 0; k < n_skip && k < 20; k++) {
      const char *why, *path = stoke_source_skipped(src, k, &why);
      fprintf(f, "  %s: %s\n", path, why ? why : "");
    }
    if (n_skip > 20) fprintf(f, "  ... %zu more\n", n_skip - 20);
  }
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", shown);
    cJSON_AddStringToObject(o, "kind", stoke_source_kind(src));
    cJSON_AddNumberToObject(o, "samples", (double)res.n_samples);
    cJSON_AddNumberToObject(o, "classes", (double)n_classes);
    cJSON_AddNumberToObject(o, "shards", (double)res.n_shards);
    cJSON_AddStringToObject(o, "first_shard", res.first_shard);
    cJSON_AddNumberToObject(o, "stale_shards_removed",
                            (double)res.n_stale_removed);
    cJSON_AddNumberToObject(o, "bytes", (double)res.bytes);
    cJSON_AddNumberToObject(o, "bytes_in", (double)res.bytes_in);
    cJSON_AddNumberToObject(o, "jpegs_rewritten", (double)res.n_rewritten);
    cJSON_AddNumberToObject(o, "jpegs_ready", (double)res.n_ready);
    cJSON_AddNumberToObject(o, "jpegs_kept", (double)res.n_kept);
    cJSON_AddNumberToObject(o, "resized", (double)res.n_resized);
    cJSON_AddNumberToObject(o, "max_side", cfg.max_side);
    cJSON_AddNumberToObject(o, "quality", cfg.max_side ? cfg.quality : 0);
    cJSON_AddStringToObject(o, "first_kept", res.first_kept);
    cJSON_AddNumberToObject(o, "seconds", secs);
    cJSON *sk = cJSON_AddArrayToObject(o, "skipped");
    for (size_t k = 0; k < n_skip; k++) {
      const char *why, *path = stoke_source_skipped(src, k, &why);
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "path", path ? path : "");
      cJSON_AddStringToObject(e, "reason", why ? why : "");
      cJSON_AddItemToArray(sk, e);
    }
    rc = cli_write_json(json_path, json, o);
    cJSON_Delete(o);
    stoke_source_destroy(src);
    return rc;
  }
  stoke_source_destroy(src);
  return CLI_OK;
}
