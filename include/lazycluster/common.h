/*
 * lazycluster/common.h - export macro, error codes, memory and version.
 *
 * Threads: every function here may be called from any thread. lc_error_last() reads the detail of
 * the last failed call made on the calling thread.
 */
#ifndef LAZYCLUSTER_COMMON_H
#define LAZYCLUSTER_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LC_BUILDING) && defined(__GNUC__)
#define LC_EXTERN __attribute__((visibility("default")))
#else
#define LC_EXTERN
#endif

#define LC_VERSION_MAJOR 0
#define LC_VERSION_MINOR 1
#define LC_VERSION_PATCH 0
/**
 * The version these headers belong to as one number, MAJOR * 1000000 + MINOR * 1000 + PATCH
 * (0.1.0 is 1000), as SQLite numbers its own: it only ever grows. A plug-in compares the library
 * it is loaded into (lc_version_number(), or the number its entry point receives) with it.
 */
#define LC_VERSION_NUMBER (LC_VERSION_MAJOR * 1000000 + LC_VERSION_MINOR * 1000 + LC_VERSION_PATCH)

/*
 * The project's own error codes. System errors are returned as negative errno values (-ETIMEDOUT,
 * -ECONNREFUSED, -EADDRINUSE, -ENOENT, -EINVAL, -ENOMEM, ...); these codes sit far below them.
 * X(NAME, VALUE, TEXT)
 */
#define LC_ERRNO_MAP(X)                                                                            \
  X(EINTERNAL, -30000, "internal error")                                                           \
  X(ESSH, -30001, "SSH protocol error")                                                            \
  X(EHOSTKEYUNKNOWN, -30002, "host key is not known")                                              \
  X(EHOSTKEYCHANGED, -30003, "host key has changed")                                               \
  X(EAUTH, -30004, "authentication failed")                                                        \
  X(EKEYLOCKED, -30005, "private key is encrypted and cannot be unlocked")                         \
  X(ECONFIG, -30006, "bad configuration")                                                          \
  X(ECLOSED, -30007, "connection to the host is closed")                                           \
  X(EREMOTE, -30008, "remote command failed")                                                      \
  X(ENOPORTS, -30009, "no free port left")                                                         \
  X(EFORWARD, -30010, "port forwarding refused")                                                   \
  X(ENOTCONNECTED, -30011, "runtime is not connected")                                             \
  X(ECANCELED, -30012, "canceled")

typedef enum lc_errno {
#define LC__ERR_ENUM(name, value, text) LC_##name = value,
  LC_ERRNO_MAP(LC__ERR_ENUM)
#undef LC__ERR_ENUM
      LC_OK = 0
} lc_errno;

/** Short English text for an error code (ours or a negative errno). Never NULL; static storage. */
LC_EXTERN const char *lc_strerror(int err);

/** The symbolic name of an error code ("LC_EAUTH", "ETIMEDOUT"). Never NULL; static storage. */
LC_EXTERN const char *lc_err_name(int err);

/**
 * Detail of the last failed call on this thread, naming the host, port or file involved
 * ("lab3: connection refused"). Never NULL; "" when nothing failed yet. Valid until the next
 * lazycluster call on this thread.
 */
LC_EXTERN const char *lc_error_last(void);

/**
 * Sets the calling thread's error detail (printf-style, one sentence naming the host, file or
 * option at fault) and returns code, so that a cluster type or any code called back by the
 * library can report its own failure: `return lc_error_set(-EINVAL, "greeter: mesh=%s: want 0 or
 * 1", v);`. The text is cut at 1 KiB.
 */
LC_EXTERN int lc_error_set(int code, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/** Frees memory the library allocated and handed to the caller (strings, arrays). NULL is fine. */
LC_EXTERN void lc_free(void *ptr);

/** A copy of s from the library's allocator (what a launcher returns as its command is freed
 * with lc_free), or NULL when s is NULL or memory ran out. */
LC_EXTERN char *lc_strdup(const char *s);

/** printf into a new string from the library's allocator (free with lc_free), or NULL when memory
 * ran out or the format failed. */
LC_EXTERN char *lc_asprintf(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/**
 * Receives a warning: something the library went on without, which the user should know about
 * (for example a keyword of the ssh config that changes how a host is reached and that is not
 * implemented). message is one sentence naming the file, line or host; borrowed for the call.
 * May run on any thread, also the engine's: it must return quickly and must not call blocking
 * lazycluster functions.
 */
typedef void (*lc_warning_cb)(const char *message, void *payload);

/**
 * Sets the process-wide warning handler (NULL: warnings are dropped, the default, since the
 * library never prints). Each distinct warning is handed over once per process.
 */
LC_EXTERN void lc_set_warning_handler(lc_warning_cb cb, void *payload);

/** The library's version as "MAJOR.MINOR.PATCH". Static storage. */
LC_EXTERN const char *lc_version(void);

/** The library's version as one number (LC_VERSION_NUMBER of the headers it was built with). */
LC_EXTERN unsigned int lc_version_number(void);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_COMMON_H */
