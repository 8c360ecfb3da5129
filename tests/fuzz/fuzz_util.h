/*
 * fuzz_util.h - what the libFuzzer targets of tests/fuzz/ share: a private directory for the
 * targets that read files (made once per process, removed at exit) and writing a file there.
 *
 * Each target is one LLVMFuzzerTestOneInput that hands its input to one of the library's parsers
 * of outside input, as the library itself calls it; see docs/security.md, "Fuzzing".
 */
#ifndef LC_FUZZ_UTIL_H
#define LC_FUZZ_UTIL_H

#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char fuzz_root[64];

static inline int fuzz_remove_one(const char *path, const struct stat *st, int flag,
                                  struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static inline void fuzz_remove_root(void) {
  if (fuzz_root[0] != '\0')
    nftw(fuzz_root, fuzz_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The process's own directory under /tmp, made on the first call. */
static inline const char *fuzz_dir(void) {
  if (fuzz_root[0] == '\0') {
    snprintf(fuzz_root, sizeof(fuzz_root), "/tmp/lc_fuzz_XXXXXX");
    if (mkdtemp(fuzz_root) == NULL) {
      perror("mkdtemp");
      abort();
    }
    atexit(fuzz_remove_root);
  }
  return fuzz_root;
}

/* Writes [data, data + size) to path (replacing it); aborts when it cannot: the target would test
 * nothing. */
static inline void fuzz_write_file(const char *path, const void *data, size_t size) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  const char *p = data;
  if (fd < 0) {
    perror(path);
    abort();
  }
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0) {
      perror(path);
      abort();
    }
    p += n;
    size -= (size_t)n;
  }
  close(fd);
}

/* A NUL-terminated heap copy of [data, data + size). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (s == NULL)
    abort();
  memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

#endif /* LC_FUZZ_UTIL_H */
