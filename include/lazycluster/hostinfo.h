/*
 * lazycluster/hostinfo.h - what a machine offers: OS, CPU cores, memory, GPUs.
 *
 * Threads: every function here may be called from any thread.
 */
#ifndef LAZYCLUSTER_HOSTINFO_H
#define LAZYCLUSTER_HOSTINFO_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One GPU as the CUDA runtime (or NVML, or nvidia-smi) numbers it. */
typedef struct lc_gpu {
  int index;
  char uuid[64];          /**< "GPU-..." or "" when unknown */
  char name[128];
  uint64_t memory_bytes;
} lc_gpu;

/** Facts about one machine. */
typedef struct lc_hostinfo {
  char hostname[256];
  char os[128];           /**< PRETTY_NAME of /etc/os-release, else the kernel's name */
  char kernel[128];       /**< uname -r */
  char arch[32];          /**< uname -m */
  double cores;           /**< usable CPUs: online CPUs capped by affinity and cgroup cpu.max */
  uint64_t memory_bytes;  /**< MemTotal capped by the cgroup v1/v2 memory limit */
  size_t gpu_count;
  lc_gpu *gpus;           /**< gpu_count entries, owned by the hostinfo */
  char gpu_source[16];    /**< "cuda", "nvml", "nvidia-smi" or "none" */
  char gpu_reason[256];   /**< when gpu_count is 0: why (no runtime library, no driver, ...);
                               with source "nvml": why the CUDA runtime was not used; else "" */
} lc_hostinfo;

/**
 * Reads this machine's facts into a new hostinfo that the caller frees with lc_hostinfo_free.
 * GPUs come from the CUDA runtime (libcudart, or the file LC_CUDART_PATH names) loaded at run time,
 * numbered as CUDA numbers them, with NVML (libnvidia-ml.so.1, or LC_NVML_PATH) filling in UUIDs
 * and listing the GPUs when no runtime works. No GPU, no driver and no CUDA are not errors:
 * gpu_count is 0 and gpu_reason says why. Returns 0, -EINVAL (out is NULL) or -ENOMEM.
 */
LC_EXTERN int lc_hostinfo_local(lc_hostinfo **out);

/** Frees a hostinfo. NULL is fine. */
LC_EXTERN void lc_hostinfo_free(lc_hostinfo *info);

/**
 * Renders info as one JSON object on one line (what `lazyclusterctl probe --json` prints):
 * hostname, os, kernel, arch, cores, memory_bytes, gpus [{index, uuid, name, memory_bytes}],
 * gpu_source, gpu_reason. Free the string with lc_free. Returns 0, -EINVAL (a NULL argument) or
 * -ENOMEM.
 */
LC_EXTERN int lc_hostinfo_to_json(char **out, const lc_hostinfo *info);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_HOSTINFO_H */
