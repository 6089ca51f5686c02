/* crc.c — CRC-32, for every checked byte stream (packed shards, the
** quarantine file, the resume state, the published snapshots).
**
** zlib's crc32_z: the same polynomial (IEEE 802.3, reflected 0xEDB88320)
** as the byte-at-a-time table this file held before, but computed several
** bytes a step.  A remote packed sample is checked on every read, and the
** table's ~0.4 GB/s made the check 17% of a remote images run's CPU
** (perf, cpu-clock: about 130 us of a 54 KB sample). */
#include "core/core.h"

#include <zlib.h>

uint32_t stoke__crc32(uint32_t crc, const void *p, size_t n) {
  return (uint32_t)crc32_z(crc, p, n);
}
