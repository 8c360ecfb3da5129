/*
 * error.c - error codes, their names and texts, and the thread-local error detail.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[LC_ERRMSG_MAX];

static const struct {
  int err;
  const char *name;
} errno_names[] = {
#define E(x) {x, #x}
  E(EPERM),        E(ENOENT),      E(EIO),          E(E2BIG),        E(EBADF),
  E(EAGAIN),       E(ENOMEM),      E(EACCES),       E(EBUSY),        E(EEXIST),
  E(ENOTDIR),      E(EISDIR),      E(EINVAL),       E(ENOSPC),       E(EPIPE),
  E(ERANGE),       E(ENAMETOOLONG), E(ENOSYS),      E(ENOTSUP),      E(EADDRINUSE),
  E(EADDRNOTAVAIL), E(ENETDOWN),   E(ENETUNREACH),  E(ECONNABORTED), E(ECONNRESET),
  E(ENOTCONN),     E(ETIMEDOUT),   E(ECONNREFUSED), E(EHOSTDOWN),    E(EHOSTUNREACH),
  E(ECANCELED),    E(ESRCH),       E(ECHILD),       E(EPROTO),       E(EMSGSIZE),
#undef E
};

const char *lc_strerror(int err) {
  switch (err) {
  case 0:
    return "success";
#define LC__ERR_TEXT(name, value, text)                                                            \
  case value:                                                                                      \
    return text;
    LC_ERRNO_MAP(LC__ERR_TEXT)
#undef LC__ERR_TEXT
  default:
    break;
  }
  if (err < 0 && err > -4096)
    return strerror(-err);
  return "unknown error";
}

const char *lc_err_name(int err) {
  switch (err) {
  case 0:
    return "LC_OK";
#define LC__ERR_NAME(name, value, text)                                                            \
  case value:                                                                                      \
    return "LC_" #name;
    LC_ERRNO_MAP(LC__ERR_NAME)
#undef LC__ERR_NAME
  default:
    break;
  }
  for (size_t i = 0; i < LC_ARRAY_SIZE(errno_names); i++)
    if (-errno_names[i].err == err)
      return errno_names[i].name;
  return "LC_EUNKNOWN";
}

const char *lc_error_last(void) { return last_error; }

void lc__error_clear(void) { last_error[0] = '\0'; }

__attribute__((format(printf, 3, 0))) static void format_into(char *dst, size_t n, const char *fmt,
                                                              va_list ap) {
  if (vsnprintf(dst, n, fmt, ap) < 0)
    snprintf(dst, n, "(unformattable error)");
}

int lc__error_set(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  format_into(last_error, sizeof(last_error), fmt, ap);
  va_end(ap);
  return code;
}

int lc_error_set(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  format_into(last_error, sizeof(last_error), fmt, ap);
  va_end(ap);
  return code;
}

int lc__err_set(lc__err *e, int code, const char *fmt, ...) {
  va_list ap;
  if (e == NULL)
    return code;
  e->code = code;
  va_start(ap, fmt);
  format_into(e->msg, sizeof(e->msg), fmt, ap);
  va_end(ap);
  return code;
}

int lc__err_raise(const lc__err *e) {
  if (e->code < 0)
    snprintf(last_error, sizeof(last_error), "%s", e->msg[0] ? e->msg : lc_strerror(e->code));
  return e->code;
}

/* The warning handler, and the warnings already handed over (each once per process). */
static pthread_mutex_t warn_mu = PTHREAD_MUTEX_INITIALIZER;
static lc_warning_cb warn_cb;
static void *warn_payload;
static char **warned;
static size_t warned_n;

void lc_set_warning_handler(lc_warning_cb cb, void *payload) {
  pthread_mutex_lock(&warn_mu);
  warn_cb = cb;
  warn_payload = payload;
  pthread_mutex_unlock(&warn_mu);
}

void lc__warn(const char *message) {
  char **more, *copy = NULL;
  bool seen = false;
  pthread_mutex_lock(&warn_mu);
  for (size_t i = 0; i < warned_n && !seen; i++)
    seen = strcmp(warned[i], message) == 0;
  if (!seen && warn_cb != NULL && (copy = lc__strdup(message)) != NULL &&
      (more = realloc(warned, (warned_n + 1) * sizeof(*warned))) != NULL) {
    warned = more;
    warned[warned_n++] = copy;
    copy = NULL;
    warn_cb(message, warn_payload);
  }
  pthread_mutex_unlock(&warn_mu);
  free(copy);
}
