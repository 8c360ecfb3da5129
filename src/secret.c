/*
 * secret.c - the per-cluster secret (lazycluster/security.h): made from the system's CSPRNG, read
 * back from a file only when that file is as private as an ssh key must be, and proven with
 * HMAC-SHA256 (OpenSSL's libcrypto, which libssh links already) over a challenge the other side
 * chose.
 */
#include "internal.h"

#include "lazycluster/security.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static void to_hex(char *out, const unsigned char *in, size_t n) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = '\0';
}

/* Fills buf from getrandom, which blocks only until the kernel's pool was first seeded. */
static int random_bytes(unsigned char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = getrandom(buf + got, n - got, 0);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return lc__error_set(-errno, "secret: getrandom failed: %s", strerror(errno));
    got += (size_t)k;
  }
  return 0;
}

int lc_secret_new(char **out) {
  unsigned char raw[LC_SECRET_LEN / 2];
  char *s = NULL;
  int r;

  *out = NULL;
  if ((r = random_bytes(raw, sizeof(raw))) < 0)
    goto out;
  if ((s = lc__malloc(LC_SECRET_LEN + 1)) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  to_hex(s, raw, sizeof(raw));
  *out = s;
  r = 0;
out:
  OPENSSL_cleanse(raw, sizeof(raw));
  return r;
}

/* Non-zero when s is a secret as lc_secret_new makes them, or any other printable token:
 * printable ASCII without spaces, so that it goes through a shell word and a JSON string as it
 * is. */
static int secret_text_ok(const char *s, size_t n) {
  if (n == 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] <= ' ' || s[i] > '~' || s[i] == '"' || s[i] == '\\')
      return 0;
  return 1;
}

int lc_secret_read(char **out, const char *path) {
  struct stat st;
  char buf[1024], *s = NULL;
  ssize_t n = 0;
  size_t len = 0;
  int fd = -1, r = LC_EINTERNAL;

  *out = NULL;
  if (path == NULL || path[0] == '\0') {
    r = lc__error_set(-EINVAL, "secret: no file given (is LAZYCLUSTER_SECRET_FILE set?)");
    goto out;
  }
  if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0) {
    int e = errno;
    if (e == ELOOP)
      r = lc__error_set(-EPERM, "secret file %s is a symbolic link: refused", path);
    else
      r = lc__error_set(-e, "cannot open the secret file %s: %s", path, strerror(e));
    goto out;
  }
  if (fstat(fd, &st) < 0) {
    r = lc__error_set(-errno, "cannot stat the secret file %s: %s", path, strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    r = lc__error_set(-EPERM, "secret file %s is not a regular file: refused", path);
    goto out;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    r = lc__error_set(-EPERM,
                      "secret file %s is owned by uid %u with mode %04o: refused (it must be "
                      "owned by uid %u, this user, and not accessible by group or others)",
                      path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                      (unsigned)geteuid());
    goto out;
  }
  while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      r = lc__error_set(-errno, "cannot read the secret file %s: %s", path, strerror(errno));
      goto out;
    }
    len += (size_t)n;
  }
  while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
    len--;
  if (len == sizeof(buf) || !secret_text_ok(buf, len)) {
    r = lc__error_set(-EINVAL, "secret file %s holds no secret (%s)", path,
                      len == 0 ? "it is empty" : "not one printable word");
    goto out;
  }
  if ((s = lc__strndup(buf, len)) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  *out = s;
  r = 0;
out:
  OPENSSL_cleanse(buf, sizeof(buf));
  if (fd >= 0)
    close(fd);
  return r;
}

int lc_secret_proof(char **out, const char *secret, const char *role, const char *challenge) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int maclen = 0;
  char *msg = NULL, *s = NULL;
  int r = LC_EINTERNAL;

  *out = NULL;
  if (secret == NULL || role == NULL || challenge == NULL) {
    r = lc__error_set(-EINVAL, "secret proof: no %s given",
                      secret == NULL ? "secret"
                      : role == NULL ? "role"
                                     : "challenge");
    goto out;
  }
  if ((msg = lc__sprintf("%s:%s", role, challenge)) == NULL ||
      (s = lc__malloc(2 * 32 + 1)) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  if (HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)msg, strlen(msg), mac,
           &maclen) == NULL ||
      maclen != 32) {
    r = lc__error_set(LC_EINTERNAL, "secret proof: HMAC-SHA256 failed in OpenSSL");
    goto out;
  }
  to_hex(s, mac, maclen);
  *out = s;
  s = NULL;
  r = 0;
out:
  OPENSSL_cleanse(mac, sizeof(mac));
  free(msg);
  free(s);
  return r;
}

int lc_secret_equal(const char *a, const char *b) {
  size_t na, nb;
  if (a == NULL || b == NULL)
    return 0;
  na = strlen(a);
  nb = strlen(b);
  /* the lengths of proofs and secrets are public; the contents are compared in full */
  if (na != nb)
    return 0;
  return CRYPTO_memcmp(a, b, na) == 0;
}
