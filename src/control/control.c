/*
 * control.c - the supervisor's side: claiming a name in the state directory, the control socket
 * and its requests, giving the name back.
 */
#include "control_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define REQUEST_MAX 4096
#define REQUEST_WAIT_MS                                                                            \
  1000                     /* a client that sends nothing holds the supervisor this long at most */
#define REPLY_WAIT_MS 2000 /* and one that does not read its reply */

/* Words for made-up names: short, easy to type and to tell apart. */
static const char *const words[] = {
    "amber",  "birch", "cedar", "coral", "delta",   "ember",  "fern",   "flint", "frost", "grove",
    "hazel",  "heron", "iris",  "jade",  "juniper", "kelp",   "lark",   "lilac", "maple", "moss",
    "nova",   "oak",   "onyx",  "otter", "pine",    "quartz", "raven",  "reef",  "sage",  "slate",
    "spruce", "tide",  "umber", "vale",  "willow",  "wren",   "yarrow", "zephyr"};

/* Writes data to path (0600) through a temporary file and a rename: readers see all or nothing. */
static int write_file(const char *dir, const char *name, const char *data) {
  char *tmp = lc__sprintf("%s/.%s.tmp", dir, name), *path = lc__sprintf("%s/%s", dir, name);
  size_t len = strlen(data), done = 0;
  int fd = -1, r = -ENOMEM;
  if (tmp == NULL || path == NULL)
    goto out;
  if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0) {
    r = lc__error_set(-errno, "cannot write %s: %s", path, strerror(errno));
    goto out;
  }
  while (done < len) {
    ssize_t n = write(fd, data + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      r = lc__error_set(-errno, "cannot write %s: %s", path, strerror(errno));
      goto out;
    }
    done += (size_t)n;
  }
  if (rename(tmp, path) < 0) {
    r = lc__error_set(-errno, "cannot write %s: %s", path, strerror(errno));
    goto out;
  }
  r = 0;
out:
  if (fd >= 0)
    close(fd);
  if (r < 0 && tmp != NULL)
    unlink(tmp);
  free(tmp);
  free(path);
  return r;
}

/* What a dead supervisor left in dir, but the lock (which we hold). */
static void clear_entry(const char *dir) {
  static const char *const files[] = {"info", "ended", "control.sock", ".info.tmp", ".ended.tmp"};
  char *logs = lc__sprintf("%s/logs", dir);
  for (size_t i = 0; i < LC_ARRAY_SIZE(files); i++) {
    char *p = lc__sprintf("%s/%s", dir, files[i]);
    if (p != NULL)
      unlink(p);
    free(p);
  }
  if (logs != NULL)
    lc__control_remove_dir(logs);
  free(logs);
}

/* -EEXIST naming the live cluster in dir. */
static int name_taken(const char *dir, const char *name) {
  lc_control_entry e = {0};
  char age[32] = "";
  int r;
  lc__control_read_entry(dir, &e);
  if (e.created_ms > 0)
    lc__control_age(age, sizeof(age), lc__control_wall_ms() - e.created_ms, 0);
  r = lc__error_set(-EEXIST,
                    "a cluster named '%s' is running: its supervisor is pid %ld, started %s%s "
                    "(stop it, or choose another name)",
                    name, e.pid, age[0] ? age : "a moment", age[0] ? " ago" : " ago");
  free(e.type);
  free(e.ended);
  return r;
}

/* Makes STATE/NAME and takes its lock: ctl->dir and ctl->lock_fd on success. */
static int claim(lc_control *ctl, const char *name) {
  int made_up = name == NULL, r = 0;
  for (int attempt = 0; attempt < 64; attempt++) {
    char buf[80];
    struct stat st;
    if (made_up) {
      unsigned char rnd[4] = {0};
      if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return lc__error_set(-EIO, "getrandom failed: %s", strerror(errno));
      snprintf(buf, sizeof(buf), "lc-%s-%02x%02x", words[rnd[0] % LC_ARRAY_SIZE(words)], rnd[1],
               rnd[2]);
      name = buf;
    }
    free(ctl->dir);
    if ((ctl->dir = lc__sprintf("%s/%s", ctl->state_dir, name)) == NULL)
      return -ENOMEM;
    if (mkdir(ctl->dir, 0700) < 0) {
      if (errno != EEXIST)
        return lc__error_set(-errno, "cannot make %s: %s", ctl->dir, strerror(errno));
      if (made_up)
        continue; /* a made-up name is one nobody has, not even a dead cluster */
    } else {
      chmod(ctl->dir, 0700);
    }
    if (lstat(ctl->dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
      return lc__error_set(-EACCES, "%s is not a directory of yours", ctl->dir);
    /* a lister tests the lock with a shared lock for a moment: try a few times before taking a
     * busy lock for a live supervisor */
    for (int tries = 0; tries < 5; tries++) {
      if ((r = lc__control_lock(ctl->dir, 1)) != -EWOULDBLOCK)
        break;
      poll(NULL, 0, 20);
    }
    if (r == -EWOULDBLOCK) {
      if (made_up)
        continue;
      return name_taken(ctl->dir, name);
    }
    if (r < 0)
      return lc__error_set(r, "cannot lock %s/lock: %s", ctl->dir, strerror(-r));
    ctl->lock_fd = r;
    return (ctl->name = lc__strdup(name)) ? 0 : -ENOMEM;
  }
  return lc__error_set(-EAGAIN, "no free made-up name in %s after 64 tries", ctl->state_dir);
}

static int listen_on(lc_control *ctl) {
  struct sockaddr_un sa;
  int dirfd = -1, fd = -1, r;
  if ((r = lc__control_sockaddr(&sa, ctl->sock_path, &dirfd)) < 0)
    return r;
  if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
    r = lc__error_set(-errno, "cannot make the control socket: %s", strerror(errno));
    goto out;
  }
  unlink(ctl->sock_path);
  /* NAME/ is 0700 already: nobody else can reach the socket between bind and chmod */
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    r = lc__error_set(-errno, "cannot bind the control socket %s: %s", ctl->sock_path,
                      strerror(errno));
    goto out;
  }
  if (chmod(ctl->sock_path, 0600) < 0 || listen(fd, 64) < 0) {
    r = lc__error_set(-errno, "cannot listen on the control socket %s: %s", ctl->sock_path,
                      strerror(errno));
    goto out;
  }
  ctl->listen_fd = fd;
  fd = -1;
  r = 0;
out:
  if (fd >= 0)
    close(fd);
  if (dirfd >= 0)
    close(dirfd);
  return r;
}

int lc_control_new(lc_control **out, const lc_control_options *opts) {
  lc_control_options o = LC_CONTROL_OPTIONS_INIT;
  lc_control *ctl = NULL;
  char info[256];
  int r = -ENOMEM;
  *out = NULL;
  LC__CHECK_VERSION(opts, LC_CONTROL_OPTIONS_VERSION, "lc_control_options");
  if (opts != NULL)
    lc__options_copy(&o, opts, sizeof(o));
  if (o.name != NULL && (r = lc__control_check_name(o.name)) < 0)
    return r;
  if (o.log_max_bytes < 0)
    return lc__error_set(-EINVAL, "log_max_bytes is %lld: it cannot be negative", o.log_max_bytes);
  if ((ctl = lc__calloc(1, sizeof(*ctl))) == NULL)
    return -ENOMEM;
  ctl->lock_fd = ctl->listen_fd = -1;
  ctl->master_log.fd = ctl->cluster_log.fd = -1;
  ctl->log_max = o.log_max_bytes ? o.log_max_bytes : 8LL << 20;
  pthread_mutex_init(&ctl->log_mu, NULL);
  ctl->created_ms = lc__control_wall_ms();
  if ((ctl->type = lc__strdup(o.type_name ? o.type_name : "")) == NULL ||
      (ctl->state = lc__strdup("starting")) == NULL)
    goto fail;
  if ((r = lc__control_state_dir(&ctl->state_dir, o.state_dir)) < 0 || (r = claim(ctl, o.name)) < 0)
    goto fail;
  clear_entry(ctl->dir);
  r = -ENOMEM;
  if ((ctl->logs_dir = lc__sprintf("%s/logs", ctl->dir)) == NULL ||
      (ctl->sock_path = lc__sprintf("%s/control.sock", ctl->dir)) == NULL)
    goto fail;
  snprintf(info, sizeof(info), "pid %ld\ncreated %lld\ntype %s\n", (long)getpid(), ctl->created_ms,
           ctl->type);
  if ((r = write_file(ctl->dir, "info", info)) < 0)
    goto fail;
  if (mkdir(ctl->logs_dir, 0700) < 0) {
    r = lc__error_set(-errno, "cannot make %s: %s", ctl->logs_dir, strerror(errno));
    goto fail;
  }
  if ((r = listen_on(ctl)) < 0)
    goto fail;
  *out = ctl;
  return 0;
fail:
  lc_control_free(ctl, NULL); /* a name it claimed goes again; the detail stays */
  return r;
}

const char *lc_control_name(const lc_control *ctl) { return ctl->name; }
const char *lc_control_dir(const lc_control *ctl) { return ctl->dir; }
const char *lc_control_logs_dir(const lc_control *ctl) { return ctl->logs_dir; }
int lc_control_fd(const lc_control *ctl) { return ctl->listen_fd; }
void lc_control_attach(lc_control *ctl, lc_cluster *c) { ctl->cluster = c; }

void lc_control_set_state(lc_control *ctl, const char *state, const char *why) {
  char *s = lc__strdup(state ? state : "running"), *w = why ? lc__strdup(why) : NULL;
  if (s == NULL || (why != NULL && w == NULL)) {
    free(s);
    free(w);
    return;
  }
  free(ctl->state);
  free(ctl->why);
  ctl->state = s;
  ctl->why = w;
}

int lc_control_set_env(lc_control *ctl, const char *const *env) {
  size_t n = 0;
  char **copy;
  while (env != NULL && env[n] != NULL) {
    if (strchr(env[n], '=') == NULL || env[n][0] == '=')
      return lc__error_set(-EINVAL, "environment entry '%s' is not NAME=VALUE", env[n]);
    n++;
  }
  if ((copy = lc__calloc(n + 1, sizeof(*copy))) == NULL)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    if ((copy[i] = lc__strdup(env[i])) == NULL) {
      for (size_t j = 0; j < i; j++)
        free(copy[j]);
      free(copy);
      return -ENOMEM;
    }
  }
  for (size_t i = 0; ctl->env != NULL && ctl->env[i] != NULL; i++)
    free(ctl->env[i]);
  free(ctl->env);
  ctl->env = copy;
  return 0;
}

/* Writes all of data, waiting up to wait_ms in all for a slow reader. */
static int write_bounded(int fd, const char *data, size_t len, int wait_ms) {
  uint64_t end = lc__now_ms() + (uint64_t)wait_ms;
  size_t done = 0;
  while (done < len) {
    ssize_t n = send(fd, data + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      done += (size_t)n;
      continue;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return -errno;
    uint64_t now = lc__now_ms();
    if (now >= end)
      return -ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    poll(&p, 1, (int)(end - now));
  }
  return 0;
}

/* Reads one request line of at most REQUEST_MAX bytes within REQUEST_WAIT_MS: 0 with the line in
 * buf, or an error reply's text. */
static const char *read_request(int fd, char *buf, size_t size) {
  uint64_t end = lc__now_ms() + REQUEST_WAIT_MS;
  size_t len = 0;
  for (;;) {
    ssize_t n = recv(fd, buf + len, size - 1 - len, MSG_DONTWAIT);
    if (n > 0) {
      char *nl;
      len += (size_t)n;
      buf[len] = '\0';
      if ((nl = memchr(buf, '\n', len)) != NULL) {
        *nl = '\0';
        break;
      }
      if (len >= size - 1)
        return "error the request is too long";
      continue;
    }
    if (n == 0) { /* the client's end of writing: what came is the request */
      buf[len] = '\0';
      if (len == 0)
        return "error no request came";
      break;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return "error cannot read the request";
    uint64_t now = lc__now_ms();
    if (now >= end)
      return "error no request within 1 s";
    struct pollfd p = {.fd = fd, .events = POLLIN};
    poll(&p, 1, (int)(end - now));
  }
  len = strlen(buf);
  while (len > 0 && (buf[len - 1] == '\r' || buf[len - 1] == ' '))
    buf[--len] = '\0';
  return NULL;
}

/* One connection: 1 when it asked to stop (then it is kept for lc_control_free), else 0. */
static int serve_one(lc_control *ctl, int fd) {
  struct ucred cred;
  socklen_t clen = sizeof(cred);
  char req[REQUEST_MAX + 1];
  const char *bad;
  lc__buf reply = {0};
  int r = 0;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 || cred.uid != geteuid()) {
    if (clen == sizeof(cred))
      lc_control_log_event(ctl, "refused a connection from uid %ld (pid %ld)", (long)cred.uid,
                           (long)cred.pid);
    else
      lc_control_log_event(ctl, "refused a connection whose peer is unknown");
    close(fd);
    return 0;
  }
  if ((bad = read_request(fd, req, sizeof(req))) != NULL) {
    write_bounded(fd, bad, strlen(bad), REPLY_WAIT_MS);
    write_bounded(fd, "\n", 1, REPLY_WAIT_MS);
    close(fd);
    return 0;
  }
  r = lc__control_answer(ctl, req, &reply);
  if (r == 1) {
    int *fds = lc__realloc(ctl->stop_fds, (ctl->n_stop + 1) * sizeof(*fds));
    if (fds != NULL) {
      ctl->stop_fds = fds;
      ctl->stop_fds[ctl->n_stop++] = fd;
      return 1;
    }
    close(fd);
    return 1;
  }
  if (r < 0 || reply.data == NULL)
    write_bounded(fd, "error out of memory\n", 20, REPLY_WAIT_MS);
  else
    write_bounded(fd, reply.data, reply.len, REPLY_WAIT_MS);
  lc__buf_free(&reply);
  close(fd);
  return 0;
}

int lc_control_serve(lc_control *ctl, int timeout_ms) {
  struct pollfd p = {.fd = ctl->listen_fd, .events = POLLIN};
  int n, stop = 0;
  if (ctl->listen_fd < 0)
    return lc__error_set(-EBADF, "the control socket of %s is closed", ctl->name);
  n = poll(&p, 1, timeout_ms < 0 ? -1 : timeout_ms);
  if (n < 0)
    return errno == EINTR
               ? 0
               : lc__error_set(-errno, "poll on %s: %s", ctl->sock_path, strerror(errno));
  if (n == 0)
    return 0;
  for (;;) {
    int fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        break;
      return lc__error_set(-errno, "accept on %s: %s", ctl->sock_path, strerror(errno));
    }
    if (serve_one(ctl, fd) == 1)
      stop = 1;
  }
  return stop ? LC_CONTROL_STOP : 0;
}

void lc_control_free(lc_control *ctl, const char *why) {
  if (ctl == NULL)
    return;
  if (ctl->listen_fd >= 0) {
    close(ctl->listen_fd);
    unlink(ctl->sock_path);
  }
  lc__control_logs_close(ctl);
  if (ctl->lock_fd >= 0) {
    if (why == NULL) {
      lc__control_remove_dir(ctl->dir);
    } else {
      char *text = lc__sprintf("%s\n", why);
      if (text != NULL)
        write_file(ctl->dir, "ended", text);
      free(text);
    }
    close(ctl->lock_fd); /* the name is free from here on */
  }
  /* a client that asked to stop hears it once the name is free: it may start the next one */
  for (size_t i = 0; i < ctl->n_stop; i++) {
    write_bounded(ctl->stop_fds[i], "ok\nstopped\n", 11, REPLY_WAIT_MS);
    close(ctl->stop_fds[i]);
  }
  free(ctl->stop_fds);
  for (size_t i = 0; ctl->env != NULL && ctl->env[i] != NULL; i++)
    free(ctl->env[i]);
  free(ctl->env);
  free(ctl->worker_logs);
  pthread_mutex_destroy(&ctl->log_mu);
  free(ctl->name);
  free(ctl->state_dir);
  free(ctl->dir);
  free(ctl->logs_dir);
  free(ctl->sock_path);
  free(ctl->type);
  free(ctl->state);
  free(ctl->why);
  free(ctl);
}
