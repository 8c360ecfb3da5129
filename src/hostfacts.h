/*
 * hostfacts.h - a host's facts in one round trip: the POSIX sh script that gathers them, and the
 * parser of what it prints. Both are pure (no runtime, no I/O), so that lc_runtime_hostinfo can
 * run the script on one runtime and a group can run it on many hosts at once and parse each
 * host's output when it arrives.
 *
 * The script prints marker lines "@@LCF TAG [VALUE]" and, after some of them, raw content: the
 * files the cgroup, os-release and meminfo readers of hostinfo.c need (so that the parsing logic
 * exists once, in hostinfo.c, and runs here on the host's files), /proc/net/tcp{,6}, and the
 * output of `lazyclusterctl probe --json` or of nvidia-smi.
 */
#ifndef LC_HOSTFACTS_H
#define LC_HOSTFACTS_H

#include "hostinfo_internal.h"

#include "lazycluster/hostinfo.h"

/* How long the script lets `lazyclusterctl probe` or nvidia-smi take (where `timeout` exists). */
#define LC__HOSTFACTS_GPU_WAIT_S 20

/* What lc_runtime_hostinfo waits for the whole script when the caller gives no timeout. */
#define LC__HOSTFACTS_TIMEOUT_MS 30000

/*
 * Appends the script to out. executables (NULL-terminated; NULL for none) are the names to look
 * up with `command -v`; any bytes but NUL are fine, each is quoted. Returns 0 or -ENOMEM.
 */
int lc__hostfacts_command(lc__buf *out, const char *const *executables);

/*
 * Fills out (zeroed by the caller, freed by the caller with lc_hostinfo_free's logic even on
 * failure) from the script's standard output. executables must be the list the script was made
 * with. Lines before the script's first marker (a login banner on stdout) are ignored.
 * Returns 0, LC_EREMOTE (no output of the script, or output cut before its end; err says which),
 * -ENOMEM.
 */
int lc__hostfacts_parse(lc_hostinfo *out, const char *text, size_t len,
                        const char *const *executables, lc__err *err);

/*
 * Reads the output of `nvidia-smi --query-gpu=index,uuid,name,memory.total
 * --format=csv,noheader,nounits` (stdout and stderr together) that exited with exit_status into
 * out's gpus, gpu_count, gpu_source ("nvidia-smi") and gpu_reason. Error text in place of the CSV
 * ("No devices were found", a driver failure) becomes the reason; unreadable lines are skipped
 * and named in the reason. Returns 0 or -ENOMEM.
 */
int lc__nvsmi_parse(lc_hostinfo *out, const char *text, size_t len, int exit_status);

/*
 * Reads the JSON object of `lazyclusterctl probe --json` (lc_hostinfo_to_json) from text (the
 * first line that starts with '{'): its gpus, gpu_source and gpu_reason go into out; other keys
 * are skipped. Returns 0, -EINVAL (no such line, or it is not valid JSON of that shape), -ENOMEM.
 */
int lc__probe_json_parse(lc_hostinfo *out, const char *text, size_t len);

/* The number of CPUs in a kernel CPU list ("0-3,8,10-11\n" is 7); 0 when it is not one. */
long lc__cpulist_count(const char *list);

#endif /* LC_HOSTFACTS_H */
