/*
 * test_secret.c - the per-cluster secret (lazycluster/security.h) on its own: lc_secret_new's
 * form and freshness, HMAC-SHA256 proofs against RFC 4231's test vector, lc_secret_equal, and
 * lc_secret_read's refusals (a symlink, a file group or others may read, one of another owner,
 * an empty file).
 */
#include "lc_test.h"

#include "lazycluster.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/lc-test-secret.XXXXXX";

static void write_file(const char *path, const char *text, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  LC_REQUIRE(fd >= 0);
  LC_REQUIRE(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  LC_REQUIRE(fchmod(fd, mode) == 0);
  close(fd);
}

static void test_new_is_hex_and_fresh(void) {
  char *a = NULL, *b = NULL;
  LC_REQUIRE_OK(lc_secret_new(&a));
  LC_REQUIRE_OK(lc_secret_new(&b));
  LC_CHECK(strlen(a) == LC_SECRET_LEN);
  LC_CHECK(strspn(a, "0123456789abcdef") == LC_SECRET_LEN);
  LC_CHECK(strcmp(a, b) != 0);
  lc_free(a);
  lc_free(b);
}

/* HMAC-SHA256(secret, role ":" challenge): RFC 4231 test case 2's key and data, with "client:"
 * before the data; the value is Python's
 * hmac.new(b"Jefe", b"client:what do ya want for nothing?", "sha256").hexdigest(). */
static void test_proof_matches_hmac_sha256(void) {
  char *p = NULL;
  LC_REQUIRE_OK(lc_secret_proof(&p, "Jefe", "client", "what do ya want for nothing?"));
  LC_CHECK_STR(p, "c53077bbe657227cd60a743d1e5eb5ff07e9f85e33a40458dc99dfbb47150208");
  lc_free(p);
}

static void test_proof_depends_on_everything(void) {
  char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
  LC_REQUIRE_OK(lc_secret_proof(&a, "s3cret", "client", "c1"));
  LC_REQUIRE_OK(lc_secret_proof(&b, "s3cret", "server", "c1"));
  LC_REQUIRE_OK(lc_secret_proof(&c, "s3cret", "client", "c2"));
  LC_REQUIRE_OK(lc_secret_proof(&d, "other", "client", "c1"));
  LC_REQUIRE_OK(lc_secret_proof(&e, "s3cret", "client", "c1"));
  LC_CHECK(!lc_secret_equal(a, b));
  LC_CHECK(!lc_secret_equal(a, c));
  LC_CHECK(!lc_secret_equal(a, d));
  LC_CHECK(lc_secret_equal(a, e));
  lc_free(b);
  LC_CHECK(lc_secret_proof(&b, NULL, "client", "x") == -EINVAL);
  LC_CHECK(b == NULL);
  lc_free(a);
  lc_free(c);
  lc_free(d);
  lc_free(e);
}

static void test_equal(void) {
  LC_CHECK(lc_secret_equal("abc", "abc"));
  LC_CHECK(!lc_secret_equal("abc", "abd"));
  LC_CHECK(!lc_secret_equal("abc", "abcd"));
  LC_CHECK(!lc_secret_equal("", "a"));
  LC_CHECK(lc_secret_equal("", ""));
  LC_CHECK(!lc_secret_equal(NULL, "a"));
  LC_CHECK(!lc_secret_equal(NULL, NULL));
}

static void test_read(void) {
  char path[256], link[256], *s = NULL, *made = NULL;
  snprintf(path, sizeof(path), "%s/secret", dir);
  snprintf(link, sizeof(link), "%s/link", dir);
  LC_REQUIRE_OK(lc_secret_new(&made));
  char text[128];
  snprintf(text, sizeof(text), "%s\n", made);
  write_file(path, text, 0600);
  LC_REQUIRE_OK(lc_secret_read(&s, path));
  LC_CHECK_STR(s, made);
  lc_free(s);
  s = NULL;
  /* 0400 is fine too */
  LC_CHECK(chmod(path, 0400) == 0);
  LC_CHECK_OK(lc_secret_read(&s, path));
  lc_free(s);
  s = NULL;
  /* group- or world-readable: refused, naming the path and the mode */
  LC_CHECK(chmod(path, 0640) == 0);
  LC_CHECK(lc_secret_read(&s, path) == -EPERM);
  LC_CHECK(s == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), path);
  LC_CHECK_CONTAINS(lc_error_last(), "0640");
  LC_CHECK(chmod(path, 0604) == 0);
  LC_CHECK(lc_secret_read(&s, path) == -EPERM);
  LC_CHECK(chmod(path, 0620) == 0);
  LC_CHECK(lc_secret_read(&s, path) == -EPERM);
  LC_CHECK(chmod(path, 0600) == 0);
  /* a symlink to a good file: refused */
  LC_REQUIRE(symlink(path, link) == 0);
  LC_CHECK(lc_secret_read(&s, link) == -EPERM);
  LC_CHECK_CONTAINS(lc_error_last(), "symbolic link");
  /* another owner (only root can make one) */
  if (geteuid() == 0) {
    LC_CHECK(chown(path, 65534, 65534) == 0);
    LC_CHECK(lc_secret_read(&s, path) == -EPERM);
    LC_CHECK_CONTAINS(lc_error_last(), "uid 65534");
    LC_CHECK(chown(path, 0, 0) == 0);
  }
  /* a directory, nothing, an empty file, a file with spaces */
  LC_CHECK(lc_secret_read(&s, dir) == -EPERM);
  LC_CHECK(lc_secret_read(&s, "/nonexistent/lc-secret") == -ENOENT);
  write_file(path, "\n", 0600);
  LC_CHECK(lc_secret_read(&s, path) == -EINVAL);
  write_file(path, "two words\n", 0600);
  LC_CHECK(lc_secret_read(&s, path) == -EINVAL);
  LC_CHECK(lc_secret_read(&s, NULL) == -EINVAL);
  LC_CHECK(s == NULL);
  unlink(link);
  unlink(path);
  lc_free(made);
}

static void setup(void) { LC_REQUIRE(mkdtemp(dir) != NULL); }

static void teardown(void) { rmdir(dir); }

static void test_all(void) {
  setup();
  test_new_is_hex_and_fresh();
  test_proof_matches_hmac_sha256();
  test_proof_depends_on_everything();
  test_equal();
  test_read();
  teardown();
}

LC_TEST_MAIN(LC_TEST(test_all))
