/* nmo.h -- NMO's annotation API, served by spelunk's runtime.
 *
 * Programs written against the NMO profiler's documented API (its USAGE: kernel tagging with
 * nmo_start/nmo_stop, memory address tagging with nmo_tag_addr/nmo_tag_from_maps; see the NMO
 * paper, "Multi-level Memory-Centric Profiling on ARM Processors with ARM SPE", and
 * docs/runtime.md) build unchanged against this header and link with -lnmo, which spelunk
 * installs as a link to its runtime libspelunk.so. Each call becomes a spelunk phase or object:
 *
 *   nmo_start(tag)                  -> phase `tag` begins on the calling thread
 *   nmo_stop()                      -> the calling thread's innermost phase ends
 *   nmo_tag_addr(tag, start, end)   -> data object `tag` = [start, end)
 *   nmo_tag_from_maps(tag, file)    -> data object `tag` = every mapping of `file` (a path, or
 *                                      a special region such as "[heap]" or "[stack]")
 *
 * The calls do nothing unless profiling is enabled (SPELUNK_ENABLE=1 or NMO_ENABLE=1).
 * This header declares only the calls; it contains nothing of NMO's sources. */
#ifndef SPELUNK_NMO_H
#define SPELUNK_NMO_H

#ifdef __cplusplus
extern "C" {
#endif

void nmo_start(const char *tag);
void nmo_stop(void);
void nmo_tag_addr(const char *tag, void *start, void *end);
void nmo_tag_from_maps(const char *tag, const char *file);

#ifdef __cplusplus
}
#endif

#endif /* SPELUNK_NMO_H */
