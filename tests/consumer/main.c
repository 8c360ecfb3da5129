/*
 * main.c - a program that uses an installed liblazycluster, as a user would: through
 * find_package(lazycluster) or pkg-config. Exits non-zero when a result is not the expected one.
 */
#include <lazycluster.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

static int failed;

static void expect(const char *what, const char *got, const char *want) {
  if (got != NULL && strcmp(got, want) == 0) {
    printf("  ok   %s = \"%s\"\n", what, got);
    return;
  }
  printf("  FAIL %s = \"%s\", want \"%s\"\n", what, got ? got : "(null)", want);
  failed = 1;
}

int main(void) {
  /* The header and the library must come from the same release. */
  expect("lc_version()", lc_version(),
         STR(LC_VERSION_MAJOR) "." STR(LC_VERSION_MINOR) "." STR(LC_VERSION_PATCH));
  expect("lc_strerror(LC_EAUTH)", lc_strerror(LC_EAUTH), "authentication failed");
  expect("lc_err_name(-ETIMEDOUT)", lc_err_name(-ETIMEDOUT), "ETIMEDOUT");
  return failed;
}
