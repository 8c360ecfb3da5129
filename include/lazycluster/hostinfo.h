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

/*
 * A hostinfo is opaque, as every object the library fills is (libgit2's rule): callers read it
 * through the accessors below, so facts can be added and their sizes change (a longer OS name, a
 * new GPU field) without breaking a program built against an older header, and no caller can copy
 * it or free its parts on its own. A hostinfo (and every lc_gpu and string it hands out) lives
 * until lc_hostinfo_free; the accessors take NULL and then return 0, "" or NULL.
 */

/** One GPU as the CUDA runtime (or NVML, or nvidia-smi) numbers it; owned by its hostinfo. */
typedef struct lc_gpu lc_gpu;

/** Facts about one machine. */
typedef struct lc_hostinfo lc_hostinfo;

/** The host's name (uname's nodename, or `hostname` on a remote host). Borrowed. */
LC_EXTERN const char *lc_hostinfo_hostname(const lc_hostinfo *info);
/** PRETTY_NAME of /etc/os-release, else the kernel's name. Borrowed. */
LC_EXTERN const char *lc_hostinfo_os(const lc_hostinfo *info);
/** The kernel release (uname -r). Borrowed. */
LC_EXTERN const char *lc_hostinfo_kernel(const lc_hostinfo *info);
/** The architecture (uname -m). Borrowed. */
LC_EXTERN const char *lc_hostinfo_arch(const lc_hostinfo *info);
/** Usable CPUs: online CPUs capped by affinity and by the cgroup's cpu.max. */
LC_EXTERN double lc_hostinfo_cores(const lc_hostinfo *info);
/** MemTotal capped by the cgroup v1/v2 memory limit, in bytes. */
LC_EXTERN uint64_t lc_hostinfo_memory_bytes(const lc_hostinfo *info);

/** Number of GPUs (after a declaration, the declared number). */
LC_EXTERN size_t lc_hostinfo_gpu_count(const lc_hostinfo *info);
/** The i-th GPU, or NULL when i >= the GPU count. Borrowed from info. */
LC_EXTERN const lc_gpu *lc_hostinfo_gpu(const lc_hostinfo *info, size_t i);
/** "cuda", "nvml", "nvidia-smi", "declared" or "none". Borrowed. */
LC_EXTERN const char *lc_hostinfo_gpu_source(const lc_hostinfo *info);
/**
 * With no GPU: why (no runtime library, no driver, ...); with source "nvml": why the CUDA runtime
 * was not used; with "nvidia-smi": why, and lines it could not read; with "declared": what the
 * host itself reported; else "". Borrowed.
 */
LC_EXTERN const char *lc_hostinfo_gpu_reason(const lc_hostinfo *info);
/** GPUs the host itself reported, whatever a declaration says. */
LC_EXTERN size_t lc_hostinfo_gpus_detected(const lc_hostinfo *info);
/** Non-zero once lc_hostinfo_declare_gpus set the GPU count. */
LC_EXTERN int lc_hostinfo_gpus_declared(const lc_hostinfo *info);

/** The GPU's index as CUDA numbers it (-1 for a NULL gpu). */
LC_EXTERN int lc_gpu_index(const lc_gpu *gpu);
/** "GPU-..." or "" when unknown. Borrowed. */
LC_EXTERN const char *lc_gpu_uuid(const lc_gpu *gpu);
/** The device name, or "" when unknown (a declared GPU). Borrowed. */
LC_EXTERN const char *lc_gpu_name(const lc_gpu *gpu);
/** Its memory in bytes, 0 when unknown. */
LC_EXTERN uint64_t lc_gpu_memory_bytes(const lc_gpu *gpu);

/*
 * Filled by lc_runtime_hostinfo only: lc_hostinfo_local asks about no executable and lists no
 * ports (count 0, listening NULL).
 */
/** How many executables were asked about. */
LC_EXTERN size_t lc_hostinfo_executable_count(const lc_hostinfo *info);
/** The i-th executable's name as asked, or NULL when i is out of range. Borrowed. */
LC_EXTERN const char *lc_hostinfo_executable(const lc_hostinfo *info, size_t i);
/** Where the i-th executable was found (`command -v`), or NULL when absent. Borrowed. */
LC_EXTERN const char *lc_hostinfo_executable_path(const lc_hostinfo *info, size_t i);
/** TCP ports listening on any address, IPv4 or IPv6; NULL when unknown. Borrowed. */
LC_EXTERN const lc_ports *lc_hostinfo_listening(const lc_hostinfo *info);

/**
 * Reads this machine's facts into a new hostinfo that the caller frees with lc_hostinfo_free.
 * GPUs come from the CUDA runtime (libcudart, or the file LC_CUDART_PATH names) loaded at run time,
 * numbered as CUDA numbers them, with NVML (libnvidia-ml.so.1, or LC_NVML_PATH) filling in UUIDs
 * and listing the GPUs when no runtime works. No GPU, no driver and no CUDA are not errors:
 * the GPU count is 0 and lc_hostinfo_gpu_reason says why. Returns 0, -EINVAL (out is NULL) or
 * -ENOMEM.
 */
LC_EXTERN int lc_hostinfo_local(lc_hostinfo **out);

/**
 * Reads the facts of rt's host in one round trip (one command run with /bin/sh): host name, OS,
 * kernel, architecture, online CPUs capped by affinity and by the cgroup v1/v2 CPU limit of the
 * command's own cgroup, MemTotal capped by its cgroup memory limit, which of executables
 * (NULL-terminated; NULL for none) `command -v` finds, the listening TCP ports, and the GPUs:
 * from `lazyclusterctl probe --json` when that is on the host's PATH (the CUDA runtime's view),
 * else from nvidia-smi, else none (lc_hostinfo_gpu_reason says why). timeout_ms 0 means 30000.
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
 * memory). When n differs from the GPUs detected, the source becomes "declared" and the reason
 * says what the host reported. n < 0 means "nothing declared" and changes nothing.
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
