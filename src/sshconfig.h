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
  LC__STRICT_NO, /* accept unknown keys (changed keys are still refused) */
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

typedef enum lc__addr_family {
  LC__AF_ANY = 0,
  LC__AF_INET,
  LC__AF_INET6,
} lc__addr_family;

/*
 * Settings for one host after applying the config (first obtained value wins, like ssh). Lists
 * are NULL-terminated arrays with their count. "raw" values are as written in the config (what
 * `ssh -G` prints for them); the others are expanded (~, ${VAR}, % tokens) and ready to use.
 */
typedef struct lc__ssh_host {
  char *alias;      /* the name that was asked for (host part of the spec) */
  char *hostname;   /* HostName with %h and %% expanded, lowercased; else the alias */
  char *user;       /* User, or the user of the spec; NULL: the local user */
  char *local_user; /* the local user's name; NULL when unknown */
  int port;         /* Port, or the spec's port; 22 when neither says */
  char *
      *identity_files; /* IdentityFile entries, expanded, in order; NULL when the config has none */
  size_t identity_count;
  char *
      *identity_raw; /* the same as written; when none: ssh's default files ("~/.ssh/id_rsa"...) */
  size_t identity_raw_count;
  char **certificate_files; /* CertificateFile entries, expanded, in order */
  size_t certificate_count;
  char **certificate_raw;
  int identities_only;  /* IdentitiesOnly yes */
  char *identity_agent; /* IdentityAgent: a socket path (expanded), "none"; NULL: $SSH_AUTH_SOCK */
  char *identity_agent_raw;
  char *proxy_jump;    /* ProxyJump value as written ("a,b" for two hops); NULL for none */
  char *proxy_command; /* ProxyCommand with %h %n %p %r %% expanded; NULL for none */
  char *proxy_command_raw;
  char *known_hosts; /* first UserKnownHostsFile, expanded ("/dev/null" for none) */
  char *
      *known_hosts_files; /* every UserKnownHostsFile, expanded (default ~/.ssh/known_hosts{,2}) */
  size_t known_hosts_count;
  char **global_known_hosts; /* GlobalKnownHostsFile, ~ expanded (default
                                /etc/ssh/ssh_known_hosts{,2}) */
  size_t global_known_hosts_count;
  char *global_known_hosts_raw;   /* as written, space-separated */
  char *hostkey_alias;            /* HostKeyAlias, lowercased; NULL when unset */
  lc__strict strict;              /* StrictHostKeyChecking */
  char *strict_raw;               /* "true", "false", "ask", "accept-new" (as ssh -G prints it) */
  int connect_timeout_s;          /* ConnectTimeout; 0 when unset */
  int connection_attempts;        /* ConnectionAttempts; 1 when unset */
  int server_alive_interval_s;    /* ServerAliveInterval; 0 when unset (off) */
  int server_alive_given;         /* ServerAliveInterval was in the config, not implied by
                                   * BatchMode: only then does it set our keepalive */
  int server_alive_count_max;     /* ServerAliveCountMax; 3 when unset */
  lc__addr_family address_family; /* AddressFamily */
  int batch_mode;                 /* BatchMode yes */
  char *ciphers;        /* Ciphers applied to LC__SSH_CIPHERS_DEFAULT; NULL: that default */
  char *kex_algorithms; /* KexAlgorithms applied to LC__SSH_KEX_DEFAULT; NULL: that default */
  char *
      hostkey_algorithms; /* HostKeyAlgorithms applied to LC__SSH_HOSTKEYS_DEFAULT; NULL: default */
  char *pubkey_algorithms; /* PubkeyAcceptedAlgorithms applied to LC__SSH_PUBKEYS_DEFAULT */
  char **warnings;         /* keywords of the config that change how a host is reached and that
                              are not implemented, one sentence each (file:line: keyword ...) */
  size_t warning_count;
} lc__ssh_host;

/* The backend's key exchange, host key and user key algorithms (libssh 0.10 on OpenSSL). */
#define LC__SSH_KEX_DEFAULT                                                                        \
  "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,ecdh-sha2-nistp384,"          \
  "ecdh-sha2-nistp521,diffie-hellman-group18-sha512,diffie-hellman-group16-sha512,"                \
  "diffie-hellman-group-exchange-sha256,diffie-hellman-group14-sha256"
#define LC__SSH_HOSTKEYS_DEFAULT                                                                   \
  "ssh-ed25519,ecdsa-sha2-nistp521,ecdsa-sha2-nistp384,ecdsa-sha2-nistp256,rsa-sha2-512,"          \
  "rsa-sha2-256,ssh-ed25519-cert-v01@openssh.com,ecdsa-sha2-nistp521-cert-v01@openssh.com,"        \
  "ecdsa-sha2-nistp384-cert-v01@openssh.com,ecdsa-sha2-nistp256-cert-v01@openssh.com,"             \
  "rsa-sha2-512-cert-v01@openssh.com,rsa-sha2-256-cert-v01@openssh.com"
#define LC__SSH_PUBKEYS_DEFAULT LC__SSH_HOSTKEYS_DEFAULT

/* The system-wide config read after the user's (not with an explicit file, as ssh -F). Tests
 * point LC_SSH_SYSTEM_CONFIG (an internal, test-only variable) at another file. */
#define LC__SSH_SYSTEM_CONFIG "/etc/ssh/ssh_config"

/*
 * Resolves spec ("alias", "host", "user@host", "user@host:port", "[v6addr]:port") against the
 * config file path (NULL: ~/.ssh/config, where a missing file is no error, then the system-wide
 * /etc/ssh/ssh_config; an explicit path is read alone, as ssh -F, and missing is -ENOENT).
 * Supports Host blocks with patterns (*, ?, !negation, several per line), Match (host,
 * originalhost, user, localuser, exec, all, canonical, final; ! negation; a final pass as ssh),
 * Include (relative to ~/.ssh, or /etc/ssh for the system file, with globs), "Key value" and
 * "Key=value", quoted values, comments, and case-insensitive keywords. A spec's explicit user or
 * port wins over the config. Errors (LC_ECONFIG, -ENOENT) name the file and line.
 */
int lc__sshconfig_resolve(lc__ssh_host *out, const char *config_path, const char *spec,
                          lc__err *err);

/* Copies h into *out (a deep copy); -ENOMEM leaves *out zeroed. */
int lc__ssh_host_copy(lc__ssh_host *out, const lc__ssh_host *h);

/* Frees what a resolved host holds and zeroes it. */
void lc__ssh_host_clear(lc__ssh_host *h);

/*
 * The concrete aliases of the config, in file order, without duplicates: every name on a Host
 * line that has no *, ? or ! in it. Free with lc__strv_free.
 */
int lc__sshconfig_aliases(char ***out, size_t *count, const char *config_path, lc__err *err);

void lc__strv_free(char **v, size_t n);

/* Appends h in `ssh -G`'s format (lowercase keyword, space, value; one per line) to b, for the
 * keywords the SSH backend uses. */
int lc__ssh_host_print(lc__buf *b, const lc__ssh_host *h);

/* Hands each of h's warnings to the warning handler, each text once per process. */
void lc__ssh_host_warn(const lc__ssh_host *h);

#endif /* LC_SSHCONFIG_H */
