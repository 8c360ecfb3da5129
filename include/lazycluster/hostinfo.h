/*
 * lazycluster/hostinfo.h - what a machine offers: OS, CPU cores, memory, GPUs; for this machine,
 * or for a runtime's host in one round trip.
 *
 * Threads: lc_runtime_hostinfo may be called from any thread except the engine thread (so not from
 * inside a callback): it runs a command on the runtime and waits for it. Every other function here
 * may be called from any thread; a hostinfo is not locked (one thread changes it at a time).
 */
#ifndef LAZYCLUSTER_HOSTINFO_H
#define LAZYCLUSTER_HOSTINFO_H

#include "common.h"
#include "ports.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One GPU as the CUDA runtime (or NVML, or nvidia-smi) numbers it. */
typedef struct lc_gpu {
  int index;
  char uuid[64]; /**< "GPU-..." or "" when unknown */
  char name[128];
  uint64_t memory_bytes;
} lc_gpu;

/** Facts about one machine. */
typedef struct lc_hostinfo {
  char hostname[256];
  char os[128];          /**< PRETTY_NAME of /etc/os-release, else the kernel's name */
  char kernel[128];      /**< uname -r */
  char arch[32];         /**< uname -m */
  double cores;          /**< usable CPUs: online CPUs capped by affinity and cgroup cpu.max */
  uint64_t memory_bytes; /**< MemTotal capped by the cgroup v1/v2 memory limit */
  size_t gpu_count;
  lc_gpu *gpus;         /**< gpu_count entries, owned by the hostinfo */
  char gpu_source[16];  /**< "cuda", "nvml", "nvidia-smi", "declared" or "none" */
  char gpu_reason[256]; /**< when gpu_count is 0: why (no runtime library, no driver, ...);
                             with source "nvml": why the CUDA runtime was not used; with
                             "nvidia-smi": why, and lines it could not read; with "declared":
                             what the host itself reported; else "" */
  /* The fields below are filled by lc_runtime_hostinfo; lc_hostinfo_local leaves the
   * executables and the listening ports empty (0 and NULL). */
  size_t executable_count; /**< how many executables were asked about */
  char **executables;      /**< their names, as asked; owned by the hostinfo */
  char **executable_paths; /**< where each was found (`command -v`), NULL when absent; owned */
  lc_ports *listening;     /**< TCP ports that listen on any address, IPv4 or IPv6; NULL when
                                unknown; owned */
  size_t gpus_detected;    /**< GPUs the host itself reported, whatever a declaration says */
  int gpus_declared;       /**< non-zero once lc_hostinfo_declare_gpus set gpu_count */
} lc_hostinfo;

/**
 * Reads this machine's facts into a new hostinfo that the caller frees with lc_hostinfo_free.
 * GPUs come from the CUDA runtime (libcudart, or the file LC_CUDART_PATH names) loaded at run time,
 * numbered as CUDA numbers them, with NVML (libnvidia-ml.so.1, or LC_NVML_PATH) filling in UUIDs
 * and listing the GPUs when no runtime works. No GPU, no driver and no CUDA are not errors:
 * gpu_count is 0 and gpu_reason says why. Returns 0, -EINVAL (out is NULL) or -ENOMEM.
 */
LC_EXTERN int lc_hostinfo_local(lc_hostinfo **out);

/**
 * Reads the facts of rt's host in one round trip (one command run with /bin/sh): host name, OS,
 * kernel, architecture, online CPUs capped by affinity and by the cgroup v1/v2 CPU limit of the
 * command's own cgroup, MemTotal capped by its cgroup memory limit, which of executables
 * (NULL-terminated; NULL for none) `command -v` finds, the listening TCP ports, and the GPUs:
 * from `lazyclusterctl probe --json` when that is on the host's PATH (the CUDA runtime's view),
 * else from nvidia-smi, else none (gpu_reason says why). timeout_ms 0 means 30000.
 * Free *out with lc_hostinfo_free.
 * Returns 0, -ETIMEDOUT, LC_ECLOSED (the connection dropped), LC_EREMOTE (the command's output
 * is not the facts: no POSIX sh, or cut short), -EINVAL (a NULL out or rt), -ENOMEM;
 * lc_error_last() names the host.
 */
LC_EXTERN int lc_runtime_hostinfo(lc_hostinfo **out, lc_runtime *rt, const char *const *executables,
                                  int timeout_ms);

/**
 * Whether the executable name was found: 1 (found), 0 (asked about and absent), -ENOENT (not
 * asked about), -EINVAL (a NULL argument).
 */
LC_EXTERN int lc_hostinfo_has_executable(const lc_hostinfo *info, const char *name);

/**
 * Sets the GPU count to a declared one (an inventory's gpus=N), which wins over what the host
 * reported: GPUs beyond n are dropped, missing ones are added with index only (no name, UUID or
 * memory). When n differs from gpus_detected, gpu_source becomes "declared" and gpu_reason says
 * what the host reported. n < 0 means "nothing declared" and changes nothing.
 * Returns 0, -EINVAL (info is NULL), -ENOMEM.
 */
LC_EXTERN int lc_hostinfo_declare_gpus(lc_hostinfo *info, int n);

/** Frees a hostinfo. NULL is fine. */
LC_EXTERN void lc_hostinfo_free(lc_hostinfo *info);

/**
 * Renders info as one JSON object on one line (what `lazyclusterctl probe --json` prints):
 * hostname, os, kernel, arch, cores, memory_bytes, gpus [{index, uuid, name, memory_bytes}],
 * gpu_source, gpu_reason; then, only where they are set, executables {name: path or null},
 * listening [ports], gpus_detected and gpus_declared. Free the string with lc_free. Returns 0,
 * -EINVAL (a NULL argument) or -ENOMEM.
 */
LC_EXTERN int lc_hostinfo_to_json(char **out, const lc_hostinfo *info);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_HOSTINFO_H */
