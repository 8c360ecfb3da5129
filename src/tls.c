/*
 * tls.c - a cluster's TLS material (lc_tls_ca_*, lc_tls_cert_*): a per-cluster certificate
 * authority and the certificates it issues, made in memory with OpenSSL's libcrypto (the same
 * OpenSSL libssh links). Keys are ECDSA P-256; certificates are X.509 v3, signed with SHA-256,
 * with random 127-bit serials. A certificate serves both ends of a mutual TLS connection (a Dask
 * worker is a server to its peers and a client of the scheduler), so its extendedKeyUsage has
 * serverAuth and clientAuth.
 *
 * OpenSSL's errors are converted at one place, ossl_fail, with OpenSSL's own text in the detail.
 * What holds a private key (the EVP_PKEY, the PEM text) is wiped when it is freed.
 */
#include "internal.h"

#include <lazycluster/security.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define TLS_DAYS (10 * 365)      /* the CA's and the certificates' lifetime */
#define TLS_BACKDATE_S (60 * 60) /* notBefore an hour back: the hosts' clocks may differ */
#define TLS_NAME_MAX 64          /* a common name's limit (RFC 5280 ub-common-name) */

struct lc_tls_ca {
  EVP_PKEY *key;
  X509 *cert;
  char *pem;
};

struct lc_tls_cert {
  char *pem;
  char *key_pem;
};

/* The one conversion of OpenSSL's errors: LC_EINTERNAL, with what failed and OpenSSL's queued
 * error texts (oldest first) in the detail. The queue is left empty. */
static int ossl_fail(const char *what) {
  char text[512] = "", one[256];
  size_t used = 0;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    ERR_error_string_n(e, one, sizeof(one));
    if (used + strlen(one) + 3 < sizeof(text))
      used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s", used ? "; " : "", one);
  }
  return lc__error_set(LC_EINTERNAL, "tls: %s failed: %s", what,
                       used ? text : "OpenSSL gave no reason");
}

/* A new ECDSA P-256 key. */
static int new_key(EVP_PKEY **out) {
  EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, NULL);
  int r = 0;
  *out = NULL;
  if (ctx == NULL || EVP_PKEY_keygen_init(ctx) <= 0 ||
      EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx, NID_X9_62_prime256v1) <= 0 ||
      EVP_PKEY_keygen(ctx, out) <= 0)
    r = ossl_fail("making an ECDSA P-256 key");
  EVP_PKEY_CTX_free(ctx);
  return r;
}

/* A positive random serial of 127 bits (RFC 5280: at most 20 octets, positive). */
static int set_serial(X509 *x) {
  unsigned char raw[16];
  BIGNUM *bn = NULL;
  int r = 0;
  if (RAND_bytes(raw, sizeof(raw)) != 1) {
    r = ossl_fail("drawing a serial number");
    goto out;
  }
  raw[0] &= 0x7f;
  raw[0] |= 0x40; /* never a short one */
  if ((bn = BN_bin2bn(raw, sizeof(raw), NULL)) == NULL ||
      BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) == NULL)
    r = ossl_fail("setting a serial number");
out:
  BN_free(bn);
  return r;
}

/* One X.509 v3 extension from its configuration text, added to x. */
static int add_ext(X509 *x, X509V3_CTX *v3, int nid, const char *value) {
  X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, v3, nid, value);
  int r = 0;
  if (ext == NULL || X509_add_ext(x, ext, -1) != 1)
    r = ossl_fail(OBJ_nid2sn(nid));
  X509_EXTENSION_free(ext);
  return r;
}

/*
 * A certificate for key whose subject is CN=cn, issued by issuer (NULL: itself, signed with
 * key) and signed with sign_key; exts are the extensions, as pairs of NID and value, ended by 0.
 */
static int make_cert(X509 **out, EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *sign_key,
                     const int *nids, const char *const *values) {
  X509 *x = X509_new();
  X509_NAME *subject = NULL;
  X509V3_CTX v3;
  int r = 0;
  *out = NULL;
  if (x == NULL || X509_set_version(x, 2) != 1 || (subject = X509_NAME_new()) == NULL ||
      X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_UTF8, (const unsigned char *)"lazycluster",
                                 -1, -1, 0) != 1 ||
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                 0) != 1 ||
      X509_set_subject_name(x, subject) != 1 ||
      X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : subject) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(x), -TLS_BACKDATE_S) == NULL ||
      X509_gmtime_adj(X509_getm_notAfter(x), (long)TLS_DAYS * 24 * 60 * 60) == NULL ||
      X509_set_pubkey(x, key) != 1) {
    r = ossl_fail("making a certificate");
    goto out;
  }
  if ((r = set_serial(x)) < 0)
    goto out;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, issuer ? issuer : x, x, NULL, NULL, 0);
  for (size_t i = 0; nids[i] != 0; i++)
    if ((r = add_ext(x, &v3, nids[i], values[i])) < 0)
      goto out;
  if (X509_sign(x, sign_key, EVP_sha256()) <= 0) {
    r = ossl_fail("signing a certificate");
    goto out;
  }
  *out = x;
  x = NULL;
out:
  X509_NAME_free(subject);
  X509_free(x);
  return r;
}

/* The PEM text that write puts into a memory BIO, as a string of ours. The BIO's buffer is
 * cleared when it is freed (OpenSSL clears a memory BIO's buffer). */
static int to_pem(char **out, int (*write)(BIO *, void *), void *obj, const char *what) {
  BIO *b = BIO_new(BIO_s_mem());
  char *data = NULL;
  long n;
  int r = 0;
  *out = NULL;
  if (b == NULL || write(b, obj) != 1 || (n = BIO_get_mem_data(b, &data)) <= 0) {
    r = ossl_fail(what);
    goto out;
  }
  if ((*out = lc__strndup(data, (size_t)n)) == NULL)
    r = lc__error_set(-ENOMEM, "out of memory");
out:
  BIO_free(b);
  return r;
}

static int write_cert(BIO *b, void *x) { return PEM_write_bio_X509(b, x); }

/* PKCS#8, unencrypted. */
static int write_key(BIO *b, void *k) {
  return PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
}

/* Frees a string that held a key, wiping it first. */
static void free_secret(char *s) {
  if (s != NULL)
    OPENSSL_cleanse(s, strlen(s));
  free(s);
}

int lc_tls_ca_new(lc_tls_ca **out, const char *name) {
  static const int nids[] = {NID_basic_constraints, NID_key_usage, NID_subject_key_identifier, 0};
  static const char *const values[] = {"critical,CA:TRUE,pathlen:0", "critical,keyCertSign,cRLSign",
                                       "hash"};
  lc_tls_ca *ca = NULL;
  char cn[TLS_NAME_MAX + 1];
  int r;

  *out = NULL;
  if ((ca = lc__calloc(1, sizeof(*ca))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  snprintf(cn, sizeof(cn), "lazycluster %s", name ? name : "cluster");
  if ((r = new_key(&ca->key)) < 0 ||
      (r = make_cert(&ca->cert, ca->key, cn, NULL, ca->key, nids, values)) < 0 ||
      (r = to_pem(&ca->pem, write_cert, ca->cert, "writing the CA certificate")) < 0)
    goto out;
  *out = ca;
  ca = NULL;
out:
  lc_tls_ca_free(ca);
  return r;
}

const char *lc_tls_ca_pem(const lc_tls_ca *ca) { return ca ? ca->pem : NULL; }

void lc_tls_ca_free(lc_tls_ca *ca) {
  if (ca == NULL)
    return;
  EVP_PKEY_free(ca->key); /* OpenSSL clears the private key it frees */
  X509_free(ca->cert);
  free(ca->pem);
  free(ca);
}

/* A name that can stand in a subjectAltName's configuration text as it is: no ',' or ':' that
 * would add names of the caller's choosing. */
static int good_name(const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n > TLS_NAME_MAX)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = name[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '.' || ch == '-' || ch == '_'))
      return 0;
  }
  return 1;
}

int lc_tls_cert_new(lc_tls_cert **out, const lc_tls_ca *ca, const char *name) {
  static const int nids[] = {NID_basic_constraints,
                             NID_key_usage,
                             NID_ext_key_usage,
                             NID_subject_alt_name,
                             NID_subject_key_identifier,
                             NID_authority_key_identifier,
                             0};
  lc_tls_cert *cert = NULL;
  EVP_PKEY *key = NULL;
  X509 *x = NULL;
  char san[TLS_NAME_MAX + 64];
  const char *values[] = {"critical,CA:FALSE",
                          "critical,digitalSignature,keyAgreement",
                          "serverAuth,clientAuth",
                          san,
                          "hash",
                          "keyid:always"};
  int r;

  *out = NULL;
  if (ca == NULL || !good_name(name))
    return lc__error_set(-EINVAL,
                         "tls: a certificate's name must be 1-%d letters, digits, '.', '-' or "
                         "'_' (got '%.80s')",
                         TLS_NAME_MAX, name ? name : "(null)");
  snprintf(san, sizeof(san), "DNS:%s,DNS:localhost,IP:127.0.0.1", name);
  if ((cert = lc__calloc(1, sizeof(*cert))) == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  if ((r = new_key(&key)) < 0 ||
      (r = make_cert(&x, key, name, ca->cert, ca->key, nids, values)) < 0 ||
      (r = to_pem(&cert->pem, write_cert, x, "writing a certificate")) < 0 ||
      (r = to_pem(&cert->key_pem, write_key, key, "writing a private key")) < 0)
    goto out;
  *out = cert;
  cert = NULL;
out:
  EVP_PKEY_free(key);
  X509_free(x);
  lc_tls_cert_free(cert);
  return r;
}

const char *lc_tls_cert_pem(const lc_tls_cert *cert) { return cert ? cert->pem : NULL; }

const char *lc_tls_cert_key_pem(const lc_tls_cert *cert) { return cert ? cert->key_pem : NULL; }

void lc_tls_cert_free(lc_tls_cert *cert) {
  if (cert == NULL)
    return;
  free(cert->pem);
  free_secret(cert->key_pem);
  free(cert);
}
