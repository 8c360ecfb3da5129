/*
 * sshconfig.h - the user's OpenSSH client configuration, read the way ssh(1) reads it.
 */
#ifndef LC_SSHCONFIG_H
#define LC_SSHCONFIG_H

#include "internal.h"

typedef enum lc__strict {
  LC__STRICT_UNSET = 0, /* the config does not say */
  LC__STRICT_YES,       /* yes, ask: refuse unknown keys */
  LC__STRICT_ACCEPT_NEW,
  LC__STRICT_NO,        /* accept unknown keys (changed keys are still refused) */
} lc__strict;

/*
 * The SSH backend's ciphers, in order of preference, when the config has no Ciphers: AES-GCM
 * first (the fastest where the CPU has AES instructions, see docs/benchmarks.md), then
 * ChaCha20-Poly1305 (OpenSSH's first), then AES-CTR. A Ciphers value starting with +, - or ^
 * changes this list.
 */
#define LC__SSH_CIPHERS_DEFAULT                                                                    \
  "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr,"        \
  "aes256-ctr"

/* Settings for one host after applying the config (first obtained value wins, like ssh). */
typedef struct lc__ssh_host {
  char *alias;           /* the name that was asked for (host part of the spec) */
  char *hostname;        /* HostName with %h and %% expanded; else the alias */
  char *user;            /* User, or the user of the spec; NULL: the local user */
  int port;              /* Port, or the spec's port; 22 when neither says */
  char **identity_files; /* IdentityFile entries, ~ and %d %u %h %r %% expanded, in order */
  size_t identity_count;
  int identities_only;   /* IdentitiesOnly yes */
  char *proxy_jump;      /* ProxyJump value as written ("a,b" for two hops); NULL for none */
  char *known_hosts;     /* first UserKnownHostsFile, expanded; NULL: ~/.ssh/known_hosts */
  lc__strict strict;     /* StrictHostKeyChecking */
  int connect_timeout_s; /* ConnectTimeout; 0 when unset */
  char *ciphers;         /* Ciphers applied to LC__SSH_CIPHERS_DEFAULT; NULL: that default */
} lc__ssh_host;

/*
 * Resolves spec ("alias", "host", "user@host", "user@host:port", "[v6addr]:port") against the
 * config file path (NULL: ~/.ssh/config, where a missing file is no error; an explicit path that
 * is missing is -ENOENT). Supports Host blocks with patterns (*, ?, !negation, several per line),
 * Include (relative to ~/.ssh, with globs), "Key value" and "Key=value", quoted values, comments,
 * and case-insensitive keywords; Match blocks other than "Match all" are skipped. A spec's explicit
 * user or port wins over the config. Errors (LC_ECONFIG, -ENOENT) name the file and line.
 */
int lc__sshconfig_resolve(lc__ssh_host *out, const char *config_path, const char *spec,
                          lc__err *err);

/* Frees what a resolved host holds and zeroes it. */
void lc__ssh_host_clear(lc__ssh_host *h);

/*
 * The concrete aliases of the config, in file order, without duplicates: every name on a Host
 * line that has no *, ? or ! in it. Free with lc__strv_free.
 */
int lc__sshconfig_aliases(char ***out, size_t *count, const char *config_path, lc__err *err);

void lc__strv_free(char **v, size_t n);

#endif /* LC_SSHCONFIG_H */
