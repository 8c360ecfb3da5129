/*
 * test_tls.c - the TLS material of a cluster (security.h: lc_tls_ca_*, lc_tls_cert_*): a CA and
 * certificates are issued, and OpenSSL itself verifies them: the chain (X509_verify_cert) for
 * both TLS purposes (a server and a client: mutual TLS), the names (the given one, localhost,
 * 127.0.0.1), the key pair, a certificate of another CA refused, and `openssl verify` on the PEM
 * files where the openssl command exists. Bad names are refused without a certificate.
 */
#include "lc_test.h"

#include <lazycluster/security.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static X509 *pem_cert(const char *pem) {
  BIO *b = BIO_new_mem_buf(pem, -1);
  X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
  BIO_free(b);
  return x;
}

static EVP_PKEY *pem_key(const char *pem) {
  BIO *b = BIO_new_mem_buf(pem, -1);
  EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
  BIO_free(b);
  return k;
}

/* X509_verify_cert of leaf against ca for purpose: 1 verified, 0 not (err says why). */
static int verify(X509 *ca, X509 *leaf, int purpose, int *err) {
  X509_STORE *store = X509_STORE_new();
  X509_STORE_CTX *ctx = X509_STORE_CTX_new();
  int ok = 0;
  if (store != NULL && ctx != NULL && X509_STORE_add_cert(store, ca) == 1 &&
      X509_STORE_CTX_init(ctx, store, leaf, NULL) == 1) {
    X509_STORE_CTX_set_purpose(ctx, purpose);
    ok = X509_verify_cert(ctx) == 1;
    *err = X509_STORE_CTX_get_error(ctx);
  }
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return ok;
}

static void test_issue_and_verify(void) {
  lc_tls_ca *ca = NULL, *other = NULL;
  lc_tls_cert *c1 = NULL, *c2 = NULL, *stranger = NULL;
  X509 *xca = NULL, *x1 = NULL, *x2 = NULL, *xs = NULL;
  EVP_PKEY *k1 = NULL;
  int err = 0;

  LC_REQUIRE_OK(lc_tls_ca_new(&ca, "dask-7"));
  LC_REQUIRE_OK(lc_tls_cert_new(&c1, ca, "dask-scheduler"));
  LC_REQUIRE_OK(lc_tls_cert_new(&c2, ca, "dask-worker"));
  LC_REQUIRE_OK(lc_tls_ca_new(&other, "other"));
  LC_REQUIRE_OK(lc_tls_cert_new(&stranger, other, "dask-worker"));
  LC_CHECK(strncmp(lc_tls_ca_pem(ca), "-----BEGIN CERTIFICATE-----\n", 28) == 0);
  LC_CHECK(strncmp(lc_tls_cert_pem(c1), "-----BEGIN CERTIFICATE-----\n", 28) == 0);
  LC_CHECK(strncmp(lc_tls_cert_key_pem(c1), "-----BEGIN PRIVATE KEY-----\n", 28) == 0);
  LC_CHECK(strstr(lc_tls_cert_pem(c1), "PRIVATE") == NULL);
  LC_CHECK(strstr(lc_tls_ca_pem(ca), "PRIVATE") == NULL);

  LC_REQUIRE((xca = pem_cert(lc_tls_ca_pem(ca))) != NULL);
  LC_REQUIRE((x1 = pem_cert(lc_tls_cert_pem(c1))) != NULL);
  LC_REQUIRE((x2 = pem_cert(lc_tls_cert_pem(c2))) != NULL);
  LC_REQUIRE((xs = pem_cert(lc_tls_cert_pem(stranger))) != NULL);
  LC_REQUIRE((k1 = pem_key(lc_tls_cert_key_pem(c1))) != NULL);

  /* the chain, for both ends of a mutual TLS connection */
  LC_CHECK(verify(xca, x1, X509_PURPOSE_SSL_SERVER, &err));
  if (err != 0)
    fprintf(stderr, "  verify: %s\n", X509_verify_cert_error_string(err));
  LC_CHECK(verify(xca, x1, X509_PURPOSE_SSL_CLIENT, &err));
  LC_CHECK(verify(xca, x2, X509_PURPOSE_SSL_SERVER, &err));
  LC_CHECK(verify(xca, x2, X509_PURPOSE_SSL_CLIENT, &err));
  /* another cluster's certificate is not this cluster's */
  LC_CHECK(!verify(xca, xs, X509_PURPOSE_SSL_CLIENT, &err));
  LC_CHECK(err == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
  /* a leaf cannot issue: it is no CA */
  LC_CHECK(X509_check_ca(x1) == 0);
  LC_CHECK(X509_check_ca(xca) >= 1);

  /* its names */
  LC_CHECK(X509_check_host(x1, "dask-scheduler", 0, 0, NULL) == 1);
  LC_CHECK(X509_check_host(x1, "localhost", 0, 0, NULL) == 1);
  LC_CHECK(X509_check_ip_asc(x1, "127.0.0.1", 0) == 1);
  LC_CHECK(X509_check_host(x1, "lab1", 0, 0, NULL) == 0);

  /* the key is the certificate's, and an ECDSA P-256 one */
  LC_CHECK(X509_check_private_key(x1, k1) == 1);
  LC_CHECK(X509_check_private_key(x2, k1) == 0);
  LC_CHECK(EVP_PKEY_base_id(k1) == EVP_PKEY_EC && EVP_PKEY_bits(k1) == 256);

  /* random serials: two certificates of one CA differ */
  LC_CHECK(ASN1_INTEGER_cmp(X509_get_serialNumber(x1), X509_get_serialNumber(x2)) != 0);
  LC_CHECK(X509_get_version(x1) == 2);

  EVP_PKEY_free(k1);
  X509_free(xca);
  X509_free(x1);
  X509_free(x2);
  X509_free(xs);
  lc_tls_cert_free(c1);
  lc_tls_cert_free(c2);
  lc_tls_cert_free(stranger);
  lc_tls_ca_free(ca);
  lc_tls_ca_free(other);
}

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  int ok = f != NULL && fputs(text, f) >= 0;
  if (f != NULL && fclose(f) != 0)
    ok = 0;
  return ok ? 0 : -1;
}

/* `openssl verify` agrees, for both purposes, and refuses the stranger. */
static void test_openssl_verify(void) {
  char dir[] = "/tmp/lc_test_tls_XXXXXX", ca_path[64], c_path[64], s_path[64], cmd[512];
  lc_tls_ca *ca = NULL, *other = NULL;
  lc_tls_cert *c = NULL, *s = NULL;
  if (system("command -v openssl >/dev/null 2>&1") != 0) {
    fprintf(stderr, "  no openssl command: the chain was verified through the library only\n");
    return;
  }
  LC_REQUIRE(mkdtemp(dir) != NULL);
  snprintf(ca_path, sizeof(ca_path), "%s/ca.pem", dir);
  snprintf(c_path, sizeof(c_path), "%s/cert.pem", dir);
  snprintf(s_path, sizeof(s_path), "%s/stranger.pem", dir);
  LC_REQUIRE_OK(lc_tls_ca_new(&ca, "verify"));
  LC_REQUIRE_OK(lc_tls_cert_new(&c, ca, "node-1"));
  LC_REQUIRE_OK(lc_tls_ca_new(&other, "other"));
  LC_REQUIRE_OK(lc_tls_cert_new(&s, other, "node-1"));
  LC_REQUIRE(write_file(ca_path, lc_tls_ca_pem(ca)) == 0);
  LC_REQUIRE(write_file(c_path, lc_tls_cert_pem(c)) == 0);
  LC_REQUIRE(write_file(s_path, lc_tls_cert_pem(s)) == 0);
  snprintf(cmd, sizeof(cmd), "openssl verify -CAfile %s -purpose sslserver %s >&2", ca_path,
           c_path);
  LC_CHECK(system(cmd) == 0);
  snprintf(cmd, sizeof(cmd), "openssl verify -CAfile %s -purpose sslclient %s >&2", ca_path,
           c_path);
  LC_CHECK(system(cmd) == 0);
  snprintf(cmd, sizeof(cmd), "openssl verify -CAfile %s %s >/dev/null 2>&1", ca_path, s_path);
  LC_CHECK(system(cmd) != 0);
  unlink(ca_path);
  unlink(c_path);
  unlink(s_path);
  rmdir(dir);
  lc_tls_cert_free(c);
  lc_tls_cert_free(s);
  lc_tls_ca_free(ca);
  lc_tls_ca_free(other);
}

/* A name that would add names of its own to the subjectAltName, or none, is refused. */
static void test_bad_names(void) {
  lc_tls_ca *ca = NULL;
  lc_tls_cert *c = (lc_tls_cert *)&c;
  LC_REQUIRE_OK(lc_tls_ca_new(&ca, NULL));
  LC_CHECK(lc_tls_cert_new(&c, ca, "a,IP:10.0.0.1") == -EINVAL);
  LC_CHECK(c == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "a,IP:10.0.0.1");
  LC_CHECK(lc_tls_cert_new(&c, ca, "") == -EINVAL);
  LC_CHECK(lc_tls_cert_new(&c, ca, NULL) == -EINVAL);
  LC_CHECK(lc_tls_cert_new(&c, NULL, "x") == -EINVAL);
  LC_CHECK(lc_tls_cert_new(&c, ca, "dns:x") == -EINVAL);
  lc_tls_ca_free(ca);
  lc_tls_ca_free(NULL);
  lc_tls_cert_free(NULL);
  LC_CHECK(lc_tls_ca_pem(NULL) == NULL);
}

LC_TEST_MAIN(LC_TEST(test_issue_and_verify), LC_TEST(test_openssl_verify), LC_TEST(test_bad_names))
