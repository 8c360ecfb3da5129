/*
 * statedir.c - the per-user state directory and its entries: where it is, that it is this user's
 * alone, names, the lock that tells a live supervisor from a dead one, an entry's files.
 */
#include "control_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

long long lc__control_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lc__control_check_name(const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0)
    return lc__error_set(-EINVAL, "a cluster name cannot be empty");
  if (n > 64)
    return lc__error_set(-EINVAL, "bad cluster name '%.80s%s': at most 64 characters", name,
                         n > 80 ? "..." : "");
  if (name[0] == '.' || name[0] == '-')
    return lc__error_set(-EINVAL, "bad cluster name '%s': it cannot start with '%c'", name,
                         name[0]);
  for (const char *p = name; *p; p++) {
    char ch = *p;
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '.' || ch == '_' || ch == '-'))
      return lc__error_set(-EINVAL,
                           "bad cluster name '%s': only letters, digits, '.', '_' and '-' are "
                           "allowed",
                           name);
  }
  return 0;
}

/* That dir is a directory of this user's that group and others cannot enter. */
static int check_private(const char *dir) {
  struct stat st;
  if (lstat(dir, &st) < 0)
    return lc__error_set(-errno, "state directory %s: %s", dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return lc__error_set(-EACCES, "state directory %s is not a directory", dir);
  if (st.st_uid != geteuid())
    return lc__error_set(-EACCES, "state directory %s belongs to uid %ld, not to you (uid %ld)",
                         dir, (long)st.st_uid, (long)geteuid());
  if (st.st_mode & 077)
    return lc__error_set(-EACCES,
                         "state directory %s has mode %04o: it must not be open to group or "
                         "others (chmod 700 %s)",
                         dir, (unsigned)(st.st_mode & 07777), dir);
  return 0;
}

/* mkdir -p with mode 0700 for what is made; what exists is left as it is. */
static int make_dirs(const char *path) {
  char *p = lc__strdup(path);
  int r = 0;
  if (p == NULL)
    return -ENOMEM;
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0')
      continue;
    char keep = *s;
    *s = '\0';
    if (mkdir(p, 0700) == 0) {
      chmod(p, 0700); /* whatever the umask */
    } else if (errno != EEXIST) {
      r = lc__error_set(-errno, "cannot make the state directory %s: %s", p, strerror(errno));
      goto out;
    }
    *s = keep;
    if (keep == '\0')
      break;
  }
out:
  free(p);
  return r;
}

int lc_state_dir(char **out) {
  const char *xdg = getenv("XDG_RUNTIME_DIR"), *home = getenv("HOME");
  char *dir = NULL;
  int r = 0;
  *out = NULL;
  if (xdg != NULL && xdg[0] == '/') {
    dir = lc__sprintf("%s/lazycluster", xdg);
  } else {
    if (home == NULL || home[0] != '/') {
      struct passwd *pw = getpwuid(geteuid());
      home = pw ? pw->pw_dir : NULL;
    }
    if (home == NULL || home[0] != '/')
      return lc__error_set(-ENOENT,
                           "no state directory: neither $XDG_RUNTIME_DIR nor $HOME is "
                           "set, and uid %ld has no home directory",
                           (long)geteuid());
    dir = lc__sprintf("%s/.cache/lazycluster/run", home);
  }
  if (dir == NULL)
    return -ENOMEM;
  if ((r = make_dirs(dir)) < 0 || (r = check_private(dir)) < 0) {
    free(dir);
    return r;
  }
  *out = dir;
  return 0;
}

int lc__control_state_dir(char **out, const char *dir) {
  int r;
  if (dir == NULL)
    return lc_state_dir(out);
  if ((r = check_private(dir)) < 0)
    return r;
  return (*out = lc__strdup(dir)) ? 0 : -ENOMEM;
}

int lc__control_lock(const char *dir, int create) {
  char *path = lc__sprintf("%s/lock", dir);
  int r = -ENOMEM;
  if (path == NULL)
    return -ENOMEM;
  /* a cleaner may remove the entry between our open and our flock: then the lock we got is on a
   * file nobody else will find, so look again */
  for (int tries = 0; tries < 20; tries++) {
    struct stat held, now;
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
    if (fd < 0) {
      r = -errno;
      if (r == -ENOENT && create && mkdir(dir, 0700) == 0)
        continue;
      goto out;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
      r = errno == EWOULDBLOCK ? -EWOULDBLOCK : -errno;
      close(fd);
      goto out;
    }
    if (fstat(fd, &held) == 0 && stat(path, &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev) {
      r = fd;
      goto out;
    }
    close(fd);
    if (!create) {
      r = -ENOENT;
      goto out;
    }
  }
  r = -EAGAIN;
out:
  free(path);
  return r;
}

int lc__control_alive(const char *dir) {
  char *path = lc__sprintf("%s/lock", dir);
  int fd, alive = 0;
  if (path == NULL)
    return 0;
  if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
    /* a shared lock for a moment: it fails only while the supervisor holds its exclusive one */
    if (flock(fd, LOCK_SH | LOCK_NB) < 0)
      alive = errno == EWOULDBLOCK;
    close(fd);
  }
  free(path);
  return alive;
}

void lc__control_remove_dir(const char *dir) { lc__remove_tree(dir); }

/* A small file's text (at most 4 KiB), or NULL. */
static char *read_small(const char *dir, const char *name) {
  char *path = lc__sprintf("%s/%s", dir, name), *text = NULL;
  char buf[4096];
  ssize_t n;
  int fd;
  if (path == NULL)
    return NULL;
  if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
    if ((n = read(fd, buf, sizeof(buf) - 1)) >= 0)
      text = lc__strndup(buf, (size_t)n);
    close(fd);
  }
  free(path);
  return text;
}

void lc__control_read_entry(const char *dir, lc_control_entry *e) {
  char *info = read_small(dir, "info"), *line, *save = NULL;
  e->pid = 0;
  e->created_ms = 0;
  e->type = NULL;
  for (line = info ? strtok_r(info, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, "pid ", 4) == 0)
      e->pid = strtol(line + 4, NULL, 10);
    else if (strncmp(line, "created ", 8) == 0)
      e->created_ms = strtoll(line + 8, NULL, 10);
    else if (strncmp(line, "type ", 5) == 0 && e->type == NULL)
      e->type = lc__strdup(line + 5);
  }
  free(info);
  if (e->type == NULL)
    e->type = lc__strdup("");
  e->alive = lc__control_alive(dir);
  e->ended = read_small(dir, "ended");
  if (e->ended != NULL) {
    size_t n = strlen(e->ended);
    while (n > 0 && e->ended[n - 1] == '\n')
      e->ended[--n] = '\0';
  }
}

void lc__control_age(char *out, size_t size, long long ms, int compact) {
  long long s = ms < 0 ? 0 : ms / 1000;
  if (s < 120)
    snprintf(out, size, compact ? "%llds" : "%lld s", s);
  else if (s < 7200)
    snprintf(out, size, compact ? "%lldm" : "%lld min", s / 60);
  else if (s < 2 * 86400)
    snprintf(out, size, compact ? "%lldh%02lldm" : "%lld h %lld min", s / 3600, s % 3600 / 60);
  else
    snprintf(out, size, compact ? "%lldd%02lldh" : "%lld d %lld h", s / 86400, s % 86400 / 3600);
}

int lc__control_sockaddr(struct sockaddr_un *sa, const char *path, int *dirfd) {
  const char *slash = strrchr(path, '/');
  int n;
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  *dirfd = -1;
  if (strlen(path) < sizeof(sa->sun_path)) {
    memcpy(sa->sun_path, path, strlen(path) + 1);
    return 0;
  }
  /* too long for sun_path: reach it through its directory's descriptor */
  if (slash != NULL && slash != path) {
    char *dir = lc__strndup(path, (size_t)(slash - path));
    if (dir == NULL)
      return -ENOMEM;
    *dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (*dirfd >= 0) {
      n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", *dirfd, slash + 1);
      if (n > 0 && (size_t)n < sizeof(sa->sun_path))
        return 0;
      close(*dirfd);
      *dirfd = -1;
    }
  }
  return lc__error_set(-ENAMETOOLONG,
                       "the control socket's path %s is %zu characters long, more than a unix "
                       "socket takes (%zu): choose a shorter state directory",
                       path, strlen(path), sizeof(sa->sun_path) - 1);
}
