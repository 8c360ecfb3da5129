/*
 * lazycluster/security.h - a cluster's secrets: the per-cluster secret every process of a cluster
 * can prove it knows, and the TLS material (a per-cluster certificate authority and the
 * certificates it issues) for types whose programs speak TLS, such as Dask.
 *
 * A cluster makes its secret at lc_cluster_new (lc_cluster_secret) and hands it to each of its
 * processes only through a file of mode 0600 in a directory of mode 0700 on that process's host,
 * named by LAZYCLUSTER_SECRET_FILE (and in cluster.json, also 0600), never in a command line.
 * docs/security.md says what this protects against and what it does not.
 *
 * Threads: every function here may be called from any thread; none blocks on the network.
 */
#ifndef LAZYCLUSTER_SECURITY_H
#define LAZYCLUSTER_SECURITY_H

#include "common.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Characters of a secret made by lc_secret_new: 32 random bytes as lowercase hex. */
#define LC_SECRET_LEN 64

/**
 * Makes a new secret from the system's CSPRNG (getrandom): LC_SECRET_LEN hex characters. *out is
 * freed with lc_free. Returns 0, -ENOMEM, or the error of getrandom (the detail says so).
 */
LC_EXTERN int lc_secret_new(char **out);

/**
 * Reads a secret from path (what LAZYCLUSTER_SECRET_FILE names), without its trailing newline.
 * Refuses a file that is not a regular file owned by this user, or that group or others may read
 * or write, as ssh refuses such a key; path is opened without following a symlink. *out is freed
 * with lc_free. Returns 0, -ENOENT, -EPERM (the detail names the path, its owner and mode),
 * -EINVAL (empty or not a secret).
 */
LC_EXTERN int lc_secret_read(char **out, const char *path);

/**
 * The proof that the caller knows secret, for a challenge the other side chose: the lowercase hex
 * of HMAC-SHA256(secret, role ":" challenge) (64 characters). role keeps the two directions apart
 * ("client", "server"), so that a proof one side sent cannot be sent back as the other's.
 * *out is freed with lc_free. Returns 0, -EINVAL (a NULL argument), -ENOMEM.
 */
LC_EXTERN int lc_secret_proof(char **out, const char *secret, const char *role,
                              const char *challenge);

/** Non-zero when a and b are the same string, in a time that does not depend on where they
 * differ (to compare proofs). NULL equals nothing. */
LC_EXTERN int lc_secret_equal(const char *a, const char *b);

/** A certificate authority of one cluster: a key and a self-signed certificate, in memory. */
typedef struct lc_tls_ca lc_tls_ca;

/** A certificate issued by an lc_tls_ca, with its private key. */
typedef struct lc_tls_cert lc_tls_cert;

/**
 * Makes a new CA (an ECDSA P-256 key and a self-signed CA certificate valid for 10 years) whose
 * subject names name ("lazycluster <cluster>"). Returns 0, -ENOMEM, LC_EINTERNAL (OpenSSL failed:
 * the detail has its error).
 */
LC_EXTERN int lc_tls_ca_new(lc_tls_ca **out, const char *name);

/** The CA's certificate, PEM. Borrowed: lives as long as ca. */
LC_EXTERN const char *lc_tls_ca_pem(const lc_tls_ca *ca);

/**
 * Issues a certificate for name (its common name, and a DNS subjectAltName; "localhost" and
 * 127.0.0.1 are added as names too, since every process of a cluster meets the others on
 * localhost), usable by a server and by a client (mutual TLS), signed by ca, with a new ECDSA
 * P-256 key. Returns 0, -EINVAL, -ENOMEM, LC_EINTERNAL.
 */
LC_EXTERN int lc_tls_cert_new(lc_tls_cert **out, const lc_tls_ca *ca, const char *name);

/** The certificate, PEM. Borrowed. */
LC_EXTERN const char *lc_tls_cert_pem(const lc_tls_cert *cert);

/** Its private key, PEM (PKCS#8, unencrypted: write it only to a 0600 file). Borrowed. */
LC_EXTERN const char *lc_tls_cert_key_pem(const lc_tls_cert *cert);

/** Frees a certificate, wiping its key from memory. NULL is fine. */
LC_EXTERN void lc_tls_cert_free(lc_tls_cert *cert);

/** Frees a CA, wiping its key from memory. NULL is fine. */
LC_EXTERN void lc_tls_ca_free(lc_tls_ca *ca);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_SECURITY_H */
