/* core.h — what every layer shares: allocation, errors, the names of the
** public enums, dtype sizes, stage kinds, hashing, byte order and CRC-32
** (src/core/).  The bottom layer: it includes nothing of stoke's but the
** public header.  Nothing here is API. */
#ifndef STOKE_CORE_CORE_H
#define STOKE_CORE_CORE_H

#include "stoke.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define STOKE__CACHELINE 64
#define STOKE__MAX_FIELDS STOKE_MAX_FIELDS
#define STOKE__ERRMSG_CAP 512

#define STOKE__MIN(a, b) ((a) < (b) ? (a) : (b))
#define STOKE__MAX(a, b) ((a) > (b) ? (a) : (b))

/* A broken invariant: a bug in stoke, never a user error. */
#define STOKE__BUG(msg) stoke__bug(__FILE__, __LINE__, msg)
void stoke__bug(const char *file, int line, const char *msg);

/* ---- memory (alloc.c) ---------------------------------------------------- */

/* All allocation goes through these, with the loader's allocator or NULL
** for malloc/free.  They are also where tests inject allocation failures. */
void *stoke__alloc(const stoke_allocator *a, size_t n);
void *stoke__calloc(const stoke_allocator *a, size_t count, size_t size);
void stoke__free(const stoke_allocator *a, void *p);
/* Cache-line aligned (64 bytes); free with stoke__free_aligned. */
void *stoke__alloc_aligned(const stoke_allocator *a, size_t n);
void stoke__free_aligned(const stoke_allocator *a, void *p);
char *stoke__strdup(const stoke_allocator *a, const char *s);
/* a * b, or false on overflow. */
bool stoke__mul_ok(size_t a, size_t b, size_t *out);
/* A growing array of n elements of `size` bytes at *p with room for *cap:
** when full, doubles it (16 at first, at most max elements, 0: no limit).
** False when there is no room and none could be made (out of memory, or
** at max): the array is unchanged, and the caller loses the record it
** wanted to add, not its state. */
bool stoke__grow(const stoke_allocator *a, void **p, size_t *cap, size_t n,
                 size_t size, size_t max);

/* ---- errors (error.c) ---------------------------------------------------- */

/* printf into err[0..cap) (err may be NULL when cap is 0) and return code:
** how the layers below the public API report an error to their caller. */
int stoke__errf(char *err, size_t cap, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Set the calling thread's create-time message (read by stoke_errmsg(NULL))
** and return code. */
int stoke__set_tls_error(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void stoke__clear_tls_error(void);
const char *stoke__tls_error(void);
/* "12.0 MiB", "512 B": for messages. */
void stoke__format_bytes(uint64_t n, char *buf, size_t cap);

/* ---- names and kinds (names.c) ------------------------------------------- */

/* A stage of a sample's own work (READ..TRANSFORM, PYTHON..COLLATE), as
** opposed to SLOT_WAIT and COPY.  (stoke_stage_name, stoke_dtype_size,
** stoke_dtype_name and stoke_autotune_kind_name are public: stoke.h.) */
bool stoke__stage_is_work(int stage);
/* Bytes of one sample of a field desc (0 if invalid). */
size_t stoke__field_bytes(const stoke_field_desc *d);

/* s ends with suffix. */
static inline bool stoke__ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* ---- hashing (hash.c) ---------------------------------------------------- */

/* SplitMix64's finalizer, a bijection with good avalanche.  Inline: the
** random streams (sampler/rng.c) call it two to three times a draw, and a
** call across the folders' object libraries is never inlined (perf showed
** it at 7% of an empty-sample run at W=1, where b09aa3a inlined it). */
static inline uint64_t stoke__mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}
/* Fold a value or a string (eight bytes at a time, then its length, so
** "ab" + "c" != "a" + "bc") into a 64-bit hash h: identities and keys. */
uint64_t stoke__hash_u64(uint64_t h, uint64_t v);
uint64_t stoke__hash_str(uint64_t h, const char *s);

/* ---- byte order and CRC-32 (crc.c) --------------------------------------- */

/* CRC-32 (IEEE 802.3, as zlib's crc32): crc = 0 to start. */
uint32_t stoke__crc32(uint32_t crc, const void *p, size_t n);

/* Little-endian fixed-width fields of the files stoke writes. */
static inline uint32_t stoke__le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static inline uint64_t stoke__le64(const uint8_t *p) {
  return (uint64_t)stoke__le32(p) | (uint64_t)stoke__le32(p + 4) << 32;
}
static inline void stoke__put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}
static inline void stoke__put_le64(uint8_t *p, uint64_t v) {
  stoke__put_le32(p, (uint32_t)v);
  stoke__put_le32(p + 4, (uint32_t)(v >> 32));
}

#endif /* STOKE_CORE_CORE_H */
