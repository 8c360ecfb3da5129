/*
 * gpu.h - this machine's GPUs through the CUDA runtime and NVML, both loaded with dlopen at run
 * time, so that one binary serves hosts with and without CUDA. Internal to the library.
 *
 * Environment (read on every probe):
 *   LC_CUDART_PATH  the CUDA runtime library to load, and only that one (tests, odd installs)
 *   LC_NVML_PATH    the NVML library to load instead of libnvidia-ml.so.1; a path that does not
 *                   exist turns NVML off
 */
#ifndef LC_GPU_H
#define LC_GPU_H

#include "hostinfo_internal.h"

#include "lazycluster/hostinfo.h"

/*
 * Fills info's gpus, gpu_count, gpu_source and gpu_reason. GPUs come from the CUDA runtime
 * (numbered as CUDA numbers them, so CUDA_VISIBLE_DEVICES applies), with UUID, name and memory
 * from NVML where it has them; from NVML alone when no CUDA runtime works. No library, no driver
 * and no device are not errors: gpu_count is 0, gpu_source "none" and gpu_reason says why.
 * Returns 0 or -ENOMEM.
 */
int lc__gpu_probe(lc_hostinfo *info);

/* Writes a 16-byte UUID as nvidia-smi does ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"); "" when
 * all bytes are zero. n must be at least 41. */
void lc__gpu_uuid_format(char *buf, size_t n, const unsigned char bytes[16]);

/*
 * Applies CUDA_VISIBLE_DEVICES (cvd; NULL: all visible) to n devices given by their UUIDs, as the
 * CUDA driver does: a comma-separated list of indices or UUID prefixes ("GPU-8a1f" or "8a1f"),
 * ending at the first entry that names no device or names one twice. Writes the chosen device
 * numbers in order to out (room for n) and returns how many.
 */
size_t lc__gpu_visible_select(const char *cvd, const char *const *uuids, size_t n, size_t *out);

/* Entry k (0: the first) of a CUDA_VISIBLE_DEVICES list, blanks trimmed, into out (room for n):
 * the device that a process under cvd numbers k, named as cvd names it (an index or a UUID prefix).
 * Returns 0, or -1 when the list has no such entry (or it does not fit). */
int lc__gpu_visible_entry(const char *cvd, int k, char *out, size_t n);

#endif /* LC_GPU_H */
