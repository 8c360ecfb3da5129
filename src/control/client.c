/*
 * client.c - any program of the same user: list the clusters of the state directory, send one a
 * request, wait until its supervisor is gone, find its logs.
 */
#include "control_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int by_name(const void *a, const void *b) {
  return strcmp(((const lc_control_entry *)a)->name, ((const lc_control_entry *)b)->name);
}

void lc_control_entries_free(lc_control_entry *entries, size_t n) {
  for (size_t i = 0; entries != NULL && i < n; i++) {
    free(entries[i].name);
    free(entries[i].type);
    free(entries[i].ended);
  }
  free(entries);
}

/* The entries of the state directory dir. */
static int list_dir(lc_control_entry **out, size_t *n, const char *state, int clean) {
  lc_control_entry *v = NULL, *more;
  size_t len = 0, cap = 0;
  struct dirent *de;
  DIR *d;
  int r = 0;
  *out = NULL;
  *n = 0;
  if ((d = opendir(state)) == NULL)
    return lc__error_set(-errno, "cannot read the state directory %s: %s", state, strerror(errno));
  while ((de = readdir(d)) != NULL) {
    char *dir;
    struct stat st;
    if (de->d_name[0] == '.' || lc__control_check_name(de->d_name) < 0)
      continue;
    if ((dir = lc__sprintf("%s/%s", state, de->d_name)) == NULL) {
      r = -ENOMEM;
      break;
    }
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
      free(dir);
      continue;
    }
    if ((more = lc__grow(v, &cap, len + 1, sizeof(*more), 8)) == NULL) {
      free(dir);
      r = -ENOMEM;
      break;
    }
    v = more;
    memset(&v[len], 0, sizeof(v[len]));
    v[len].name = lc__strdup(de->d_name);
    lc__control_read_entry(dir, &v[len]);
    if (v[len].name == NULL || v[len].type == NULL) {
      len++;
      free(dir);
      r = -ENOMEM;
      break;
    }
    if (clean && !v[len].alive) {
      /* take its lock (a supervisor may be claiming it right now: then leave it) */
      int fd = lc__control_lock(dir, 0);
      if (fd >= 0 || fd == -ENOENT) {
        lc__control_remove_dir(dir);
        if (fd >= 0)
          close(fd);
      }
    }
    free(dir);
    len++;
  }
  closedir(d);
  if (r < 0) {
    lc_control_entries_free(v, len);
    return r;
  }
  if (len > 1)
    qsort(v, len, sizeof(*v), by_name);
  *out = v;
  *n = len;
  return 0;
}

int lc_control_list(lc_control_entry **out, size_t *n, const char *state_dir, int clean) {
  char *state = NULL;
  int r;
  *out = NULL;
  *n = 0;
  if ((r = lc__control_state_dir(&state, state_dir)) < 0)
    return r;
  r = list_dir(out, n, state, clean);
  free(state);
  return r;
}

/* "a, b (ended), c" for a message: the names there, or "none". */
static void names_there(char *out, size_t size, const char *state, int alive_only) {
  lc_control_entry *v = NULL;
  size_t n = 0, k = 0;
  out[0] = '\0';
  if (list_dir(&v, &n, state, 0) == 0) {
    for (size_t i = 0; i < n && k < size; i++) {
      if (alive_only && !v[i].alive)
        continue;
      int w = snprintf(out + k, size - k, "%s%s%s", k ? ", " : "", v[i].name,
                       v[i].alive || alive_only ? "" : " (ended)");
      if (w < 0)
        break;
      k += (size_t)w;
    }
  }
  lc_control_entries_free(v, n);
  if (out[0] == '\0')
    snprintf(out, size, "none");
}

/* The name to use: name, or the only live cluster's. *dir gets STATE/NAME. */
static int resolve(char **dir, char **used, const char *state, const char *name) {
  struct stat st;
  char there[1024];
  *dir = *used = NULL;
  if (name == NULL) {
    lc_control_entry *v = NULL;
    size_t n = 0, alive = 0, which = 0;
    int r;
    if ((r = list_dir(&v, &n, state, 0)) < 0)
      return r;
    for (size_t i = 0; i < n; i++)
      if (v[i].alive)
        alive++, which = i;
    if (alive == 1) {
      *used = lc__strdup(v[which].name);
      lc_control_entries_free(v, n);
      if (*used == NULL || (*dir = lc__sprintf("%s/%s", state, *used)) == NULL)
        return -ENOMEM;
      return 0;
    }
    lc_control_entries_free(v, n);
    if (alive == 0)
      return lc__error_set(-EINVAL, "no cluster is running (state directory %s)", state);
    names_there(there, sizeof(there), state, 1);
    return lc__error_set(-EINVAL, "%zu clusters are running (%s): name one", alive, there);
  }
  if ((*dir = lc__sprintf("%s/%s", state, name)) == NULL || (*used = lc__strdup(name)) == NULL)
    return -ENOMEM;
  if (lstat(*dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
    names_there(there, sizeof(there), state, 0);
    return lc__error_set(-ENOENT, "no cluster named '%s' (clusters here: %s)", name, there);
  }
  return 0;
}

/* LC_ECLOSED: the supervisor of name is gone, with why when it wrote it down. */
static int gone(const char *dir, const char *name) {
  lc_control_entry e = {0};
  int r;
  lc__control_read_entry(dir, &e);
  if (e.ended != NULL)
    r = lc__error_set(LC_ECLOSED, "the supervisor of %s is gone: %s", name, e.ended);
  else
    r = lc__error_set(LC_ECLOSED, "the supervisor of %s is gone (pid %ld; it left no word why)",
                      name, e.pid);
  free(e.type);
  free(e.ended);
  return r;
}

/* Waits until fd is ready for events or end (ms since lc__now_ms, 0: forever): 0, -ETIMEDOUT. */
static int wait_fd(int fd, short events, uint64_t end) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events};
    int wait = -1, n;
    if (end) {
      uint64_t now = lc__now_ms();
      if (now >= end)
        return -ETIMEDOUT;
      wait = (int)(end - now);
    }
    if ((n = poll(&p, 1, wait)) > 0)
      return 0;
    if (n < 0 && errno != EINTR)
      return -errno;
  }
}

/* Sends the request and reads the whole reply into *b. */
static int exchange(lc__buf *b, const char *dir, const char *name, const char *request,
                    int timeout_ms) {
  uint64_t end = timeout_ms < 0 ? 0 : lc__now_ms() + (uint64_t)timeout_ms + (timeout_ms == 0);
  char *path = lc__sprintf("%s/control.sock", dir);
  struct sockaddr_un sa;
  int fd = -1, dirfd = -1, r;
  if (path == NULL)
    return -ENOMEM;
  if ((r = lc__control_sockaddr(&sa, path, &dirfd)) < 0)
    goto out;
  if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
    r = lc__error_set(-errno, "cannot make a socket: %s", strerror(errno));
    goto out;
  }
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    int e = errno;
    if (!lc__control_alive(dir))
      r = gone(dir, name);
    else if (e == EACCES || e == EPERM)
      r = lc__error_set(-EACCES, "%s: permission denied", path);
    else
      r = lc__error_set(-e, "cannot reach the supervisor of %s at %s: %s", name, path, strerror(e));
    goto out;
  }
  if ((r = lc__buf_printf(b, "%s\n", request)) < 0)
    goto out;
  for (size_t done = 0; done < b->len;) {
    ssize_t n = send(fd, b->data + done, b->len - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      r = lc__control_alive(dir) ? lc__error_set(-errno, "cannot send to the supervisor of %s: %s",
                                                 name, strerror(errno))
                                 : gone(dir, name);
      goto out;
    }
    done += (size_t)n;
  }
  b->len = 0;
  shutdown(fd, SHUT_WR);
  for (;;) {
    char buf[4096];
    ssize_t n;
    if ((r = wait_fd(fd, POLLIN, end)) < 0) {
      if (r == -ETIMEDOUT)
        lc__error_set(r, "the supervisor of %s did not answer '%s' within %d ms", name, request,
                      timeout_ms);
      goto out;
    }
    n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno != ECONNRESET) {
      r = lc__error_set(-errno, "cannot read the answer of %s's supervisor: %s", name,
                        strerror(errno));
      goto out;
    }
    if (n <= 0)
      break;
    if ((r = lc__buf_append(b, buf, (size_t)n)) < 0)
      goto out;
  }
  r = 0;
out:
  if (fd >= 0)
    close(fd);
  if (dirfd >= 0)
    close(dirfd);
  free(path);
  return r;
}

int lc_control_request(char **reply, const char *state_dir, const char *name, const char *request,
                       int timeout_ms) {
  char *state = NULL, *dir = NULL, *used = NULL;
  lc__buf b = {0};
  int r;
  *reply = NULL;
  if (request == NULL || request[0] == '\0' || strchr(request, '\n') != NULL)
    return lc__error_set(-EINVAL, "a request is one non-empty line");
  if (name != NULL && (r = lc__control_check_name(name)) < 0)
    return r;
  if ((r = lc__control_state_dir(&state, state_dir)) < 0 ||
      (r = resolve(&dir, &used, state, name)) < 0)
    goto out;
  if (!lc__control_alive(dir)) {
    r = gone(dir, used);
    goto out;
  }
  if ((r = exchange(&b, dir, used, request, timeout_ms)) < 0)
    goto out;
  if (b.len == 0) {
    r = lc__control_alive(dir)
            ? lc__error_set(LC_ECLOSED,
                            "the supervisor of %s closed the connection without an "
                            "answer",
                            used)
            : gone(dir, used);
    goto out;
  }
  if (b.len >= 3 && memcmp(b.data, "ok\n", 3) == 0) {
    r = (*reply = lc__strndup(b.data + 3, b.len - 3)) ? 0 : -ENOMEM;
  } else if (b.len >= 6 && memcmp(b.data, "error ", 6) == 0) {
    char *nl = memchr(b.data, '\n', b.len);
    size_t n = (nl ? (size_t)(nl - b.data) : b.len) - 6;
    r = lc__error_set(LC_EREMOTE, "%s: %.*s", used, (int)n, b.data + 6);
  } else {
    r = lc__error_set(-EPROTO, "the supervisor of %s answered something that is not a reply", used);
  }
out:
  lc__buf_free(&b);
  free(state);
  free(dir);
  free(used);
  return r;
}

int lc_control_wait_gone(const char *state_dir, const char *name, int timeout_ms) {
  uint64_t end = timeout_ms < 0 ? 0 : lc__now_ms() + (uint64_t)timeout_ms;
  char *state = NULL, *dir = NULL;
  int r;
  if (name == NULL || (r = lc__control_check_name(name)) < 0)
    return lc__error_set(-EINVAL, "lc_control_wait_gone needs a valid name");
  if ((r = lc__control_state_dir(&state, state_dir)) < 0)
    return r;
  if ((dir = lc__sprintf("%s/%s", state, name)) == NULL) {
    free(state);
    return -ENOMEM;
  }
  /* the lock is the only sign: a bounded poll of it (a supervisor that stops is seldom waited on)
   */
  while (lc__control_alive(dir)) {
    if (end && lc__now_ms() >= end) {
      r = lc__error_set(-ETIMEDOUT, "the supervisor of %s still runs after %d ms", name,
                        timeout_ms);
      goto out;
    }
    poll(NULL, 0, 20);
  }
  r = 0;
out:
  free(state);
  free(dir);
  return r;
}

int lc_control_logs_path(char **out, const char *state_dir, const char *name) {
  char *state = NULL, *dir = NULL, *used = NULL;
  int r;
  *out = NULL;
  if (name != NULL && (r = lc__control_check_name(name)) < 0)
    return r;
  if ((r = lc__control_state_dir(&state, state_dir)) < 0 ||
      (r = resolve(&dir, &used, state, name)) < 0)
    goto out;
  r = (*out = lc__sprintf("%s/logs", dir)) ? 0 : -ENOMEM;
out:
  free(state);
  free(dir);
  free(used);
  return r;
}
