/*
 * lc_test.h - the assertion header for lazycluster's tests.
 *
 * Each test file defines test functions, lists them with LC_TEST_MAIN, and ends by printing
 * "N passed, N failed" (and exits non-zero on any failure). A failed CHECK marks the current test
 * failed and continues; a failed REQUIRE also leaves the test function.
 */
#ifndef LC_TEST_H
#define LC_TEST_H

/* LC_TEST_ASAN: built with AddressSanitizer, whose allocator keeps freed memory resident, so a
 * test's bound on this process's peak memory does not hold there (gcc and clang spell it apart). */
#if defined(__SANITIZE_ADDRESS__)
#define LC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LC_TEST_ASAN 1
#endif
#endif

/* LC_TEST_TSAN: built with ThreadSanitizer. */
#if defined(__SANITIZE_THREAD__)
#define LC_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LC_TEST_TSAN 1
#endif
#endif

/* LC_TEST_BULK_BYTES: what a test streams through the library to show that its memory stays
 * bounded: 1 GB (a multiple of 1000 and 100), in the normal build, where the bound is checked.
 * The sanitizer builds check the code those bytes go through, the same for every megabyte, and
 * run it several times slower (1 GB took about 3 minutes under ThreadSanitizer, and was the
 * CPU's largest load while the sanitizer lanes ran): an eighth of it there. */
#if defined(LC_TEST_TSAN) || defined(LC_TEST_ASAN)
#define LC_TEST_BULK_BYTES 125000000ull
#else
#define LC_TEST_BULK_BYTES 1000000000ull
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int lc_test_failed_now;

#define LC_CHECK(cond)                                                                             \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                   \
      lc_test_failed_now = 1;                                                                      \
    }                                                                                              \
  } while (0)

#define LC_REQUIRE(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "  %s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond);                 \
      lc_test_failed_now = 1;                                                                      \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

/* Checks that call returns 0; on failure prints the code and lc_error_last(). */
#define LC_CHECK_OK(call)                                                                          \
  do {                                                                                             \
    int lc_t_r_ = (call);                                                                          \
    if (lc_t_r_ != 0) {                                                                            \
      fprintf(stderr, "  %s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #call, lc_t_r_,    \
              lc_err_name(lc_t_r_), lc_error_last());                                              \
      lc_test_failed_now = 1;                                                                      \
    }                                                                                              \
  } while (0)

#define LC_REQUIRE_OK(call)                                                                        \
  do {                                                                                             \
    int lc_t_r_ = (call);                                                                          \
    if (lc_t_r_ != 0) {                                                                            \
      fprintf(stderr, "  %s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #call, lc_t_r_,    \
              lc_err_name(lc_t_r_), lc_error_last());                                              \
      lc_test_failed_now = 1;                                                                      \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

#define LC_CHECK_STR(a, b)                                                                         \
  do {                                                                                             \
    const char *lc_t_a_ = (a), *lc_t_b_ = (b);                                                     \
    if (lc_t_a_ == NULL || lc_t_b_ == NULL || strcmp(lc_t_a_, lc_t_b_) != 0) {                     \
      fprintf(stderr, "  %s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__,                           \
              lc_t_a_ ? lc_t_a_ : "(null)", lc_t_b_ ? lc_t_b_ : "(null)");                         \
      lc_test_failed_now = 1;                                                                      \
    }                                                                                              \
  } while (0)

/* Checks that haystack contains needle. */
#define LC_CHECK_CONTAINS(haystack, needle)                                                        \
  do {                                                                                             \
    const char *lc_t_h_ = (haystack), *lc_t_n_ = (needle);                                         \
    if (lc_t_h_ == NULL || strstr(lc_t_h_, lc_t_n_) == NULL) {                                     \
      fprintf(stderr, "  %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,             \
              lc_t_h_ ? lc_t_h_ : "(null)", lc_t_n_);                                              \
      lc_test_failed_now = 1;                                                                      \
    }                                                                                              \
  } while (0)

typedef struct lc_test_case {
  const char *name;
  void (*fn)(void);
} lc_test_case;

#define LC_TEST(fn)                                                                                \
  { #fn, fn }

/* Whether name is a word of the space-separated list (NULL: none). */
static inline int lc_test_listed(const char *list, const char *name) {
  size_t len = strlen(name);
  for (const char *p = list; p != NULL && *p != '\0';) {
    size_t n = strcspn(p, " ");
    if (n == len && strncmp(p, name, n) == 0)
      return 1;
    p += n;
    p += strspn(p, " ");
  }
  return 0;
}

/* Runs the named tests (all when argv names none) and prints the closing line. $LC_TEST_SKIP
 * names tests a build leaves out (the ThreadSanitizer build's too slow ones); each is said. */
static inline int lc_test_run(const lc_test_case *tests, size_t n, int argc, char **argv) {
  int passed = 0, failed = 0;
  for (size_t i = 0; i < n; i++) {
    int selected = argc < 2;
    for (int a = 1; a < argc; a++)
      if (strcmp(argv[a], tests[i].name) == 0)
        selected = 1;
    if (!selected)
      continue;
    if (lc_test_listed(getenv("LC_TEST_SKIP"), tests[i].name)) {
      fprintf(stderr, "skip %s (LC_TEST_SKIP)\n", tests[i].name);
      continue;
    }
    struct timespec t0, t1;
    double took;
    lc_test_failed_now = 0;
    fprintf(stderr, "- %s\n", tests[i].name);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tests[i].fn();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (lc_test_failed_now) {
      failed++;
      fprintf(stderr, "FAIL %s (%.1f s)\n", tests[i].name, took);
    } else {
      passed++;
      fprintf(stderr, "ok   %s (%.1f s)\n", tests[i].name, took);
    }
  }
  fflush(stderr);
  printf("%d passed, %d failed\n", passed, failed);
  return failed || passed == 0 ? 1 : 0;
}

#define LC_TEST_MAIN(...)                                                                          \
  int main(int argc, char **argv) {                                                                \
    static const lc_test_case lc_tests_[] = {__VA_ARGS__};                                         \
    return lc_test_run(lc_tests_, sizeof(lc_tests_) / sizeof(lc_tests_[0]), argc, argv);           \
  }

#endif /* LC_TEST_H */
