/* image.h — what src/source/pack.c needs of an image source, and the
** internal entry points that take a syscall table (internal). */
#ifndef STOKE_SOURCE_IMAGE_H
#define STOKE_SOURCE_IMAGE_H

#include "decode/decode.h"
#include "storage/blob.h"

/* The storage behind an image source; NULL for any other source. */
const stoke__blobset *stoke__image_blobset(const stoke_source *src);

/* Read sample index into r and probe its header: *bytes, *n (valid until
** r's next read) and *out.  Errors name the sample and its file in err.
** Any thread, with its own r and dec. */
int stoke__image_probe(const stoke__blobset *set, size_t index,
                       stoke__blob_reader *r, stoke__decoder *dec,
                       const uint8_t **bytes, size_t *n,
                       stoke_image_info *out, char *err, size_t cap);

/* stoke_verify: a decoder with src's pixel limit that decodes everything
** (no restart cuts, no window limit); STOKE_EINVAL for a source that is
** not an image source. */
int stoke__image_verify_decoder(const stoke_source *src,
                                stoke__decoder **out);
/* Read sample index of set (*bytes: its size), probe it and decode it
** whole at full scale.  0, or the error with its message in err.  Any
** thread, with its own r and dec. */
int stoke__image_verify(const stoke__blobset *set, size_t index,
                        stoke__blob_reader *r, stoke__decoder *dec,
                        uint64_t *bytes, char *err, size_t cap);
/* stoke_source_create_images with every file call through sys (NULL: the
** real calls; see os/syscalls.h), kept by the source for its life. */
int stoke__source_create_images(const char *path,
                                const stoke_image_config *cfg,
                                const stoke__sys *sys, stoke_source **out);
/* The same for stoke_source_create_images_list. */
int stoke__source_create_images_list(const char *const *paths,
                                     size_t n_paths,
                                     const stoke_image_config *cfg,
                                     const stoke__sys *sys,
                                     stoke_source **out);

/* stoke_pack with the writer's file calls and the producer threads through
** sys (NULL: the real calls).  The source's reads use its own table. */
int stoke__pack(const stoke_source *src, const char *out_prefix,
                const stoke_pack_config *cfg, const stoke__sys *sys,
                stoke_pack_result *res);

/* The packed cache of an image source over folder or tar storage, under
** dir (storage/cache.h), writing through sys; STOKE_EINVAL (with the TLS
** message) for other sources. */
struct stoke__cache;
int stoke__image_cache_open(const stoke_source *src, const char *dir,
                            uint64_t max_bytes, const stoke__sys *sys,
                            const stoke_allocator *a,
                            struct stoke__cache **out);

#endif /* STOKE_SOURCE_IMAGE_H */
