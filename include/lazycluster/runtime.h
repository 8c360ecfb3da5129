/*
 * lazycluster/runtime.h - one host: run commands, move files, keep processes on a lifeline.
 *
 * A runtime is either an SSH host (settings from the user's OpenSSH config, one multiplexed
 * connection) or this machine (no sshd needed). Both offer the same calls.
 *
 * Threads: every function here may be called from any thread except the engine thread (so not
 * from inside a callback). Calls on one runtime may be made from several threads at once.
 * Line callbacks run on the engine thread: they must return quickly and must not call blocking
 * lazycluster functions.
 */
#ifndef LAZYCLUSTER_RUNTIME_H
#define LAZYCLUSTER_RUNTIME_H

#include "common.h"
#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lc_runtime lc_runtime;
typedef struct lc_process lc_process;

/** How to treat a host key that is not in known_hosts (a changed key is always refused). */
typedef enum lc_hostkey_policy {
  LC_HOSTKEY_DEFAULT = 0,    /**< as the ssh config says (StrictHostKeyChecking), else STRICT */
  LC_HOSTKEY_STRICT = 1,     /**< refuse unknown keys */
  LC_HOSTKEY_ACCEPT_NEW = 2, /**< add unknown keys to known_hosts */
} lc_hostkey_policy;

#define LC_RUNTIME_OPTIONS_VERSION 2

/** lc_runtime_options.umask: this flag with a mode sets that umask ((LC_UMASK_SET | 022)). */
#define LC_UMASK_SET 0x10000

/** Options of a runtime. A zero field means the default. */
typedef struct lc_runtime_options {
  unsigned int version;
  /** OpenSSH config file, like `ssh -F`; NULL means ~/.ssh/config (which may be missing). */
  const char *ssh_config;
  /** Connect and authentication timeout in ms; default 10000. */
  int connect_timeout_ms;
  /**
   * A host that leaves a request unanswered this long (ms) is reported dead and its connection
   * closed; default 30000. An SSH host that has sent nothing for a sixth of it is sent a
   * keepalive@openssh.com request (which sshd must answer), so a wedged sshd whose kernel still
   * acknowledges TCP is noticed too, within the limit and a sixth; unacknowledged TCP data is
   * given up after the same time (TCP_USER_TIMEOUT).
   */
  int keepalive_timeout_ms;
  /**
   * A lifeline whose heartbeat is silent this long (ms) ends its processes; default twice
   * keepalive_timeout_ms (60000 with its default). The rule: at least twice the keepalive limit,
   * so that a network blip which the connection survives (shorter than the keepalive limit)
   * never ends the host's processes. A smaller value is kept but warned about
   * (lc_set_warning_handler callback), since such a blip can then end them while the connection
   * comes back.
   */
  int heartbeat_timeout_ms;
  /** Time between SIGTERM and SIGKILL when a process group is ended (ms); default 3000. */
  int kill_grace_ms;
  /** Unknown host keys; default LC_HOSTKEY_DEFAULT. */
  lc_hostkey_policy hostkey_policy;
  /** Non-zero: keep the working directory at lc_runtime_free (default: remove it). */
  int keep_workdir;
  /** Parent of working directories; default "${XDG_CACHE_HOME:-$HOME/.cache}/lazycluster". It
   * must be this user's and not writable by group or others (else the working directory is
   * refused, naming it); working directories are made 0700. */
  const char *workdir_root;
  /* version 2 */
  /** The umask of every process this runtime starts: 0 means 077 (what they write is this user's
   * alone); LC_UMASK_SET | MODE sets MODE. Files the runtime writes itself are 0600 unless a
   * mode is given (lc_runtime_write_file, lc_runtime_send_file's source mode). */
  int umask;
} lc_runtime_options;

#define LC_RUNTIME_OPTIONS_INIT                                                                    \
  { .version = LC_RUNTIME_OPTIONS_VERSION }

/** Initialises opts to the defaults. */
LC_EXTERN void lc_runtime_options_init(lc_runtime_options *opts);

/**
 * Connects to an SSH host and authenticates, within the connect timeout.
 * host is an alias of the ssh config, or "[user@]hostname[:port]". opts may be NULL.
 * Returns 0, -ETIMEDOUT, -ECONNREFUSED, -EHOSTUNREACH, LC_EHOSTKEYUNKNOWN, LC_EHOSTKEYCHANGED,
 * LC_EAUTH, LC_EKEYLOCKED, LC_ECONFIG; lc_error_last() names the host and the reason.
 */
LC_EXTERN int lc_runtime_new_ssh(lc_runtime **out, lc_engine *engine, const char *host,
                                 const lc_runtime_options *opts);

/**
 * What the ssh config says for host, as the SSH backend will use it, in `ssh -G`'s format: one
 * "keyword value" line per keyword the backend uses (lowercase keywords). ssh_config as in
 * lc_runtime_options (NULL: ~/.ssh/config, then /etc/ssh/ssh_config). *out is freed with lc_free.
 * Returns 0, LC_ECONFIG or -ENOENT (lc_error_last() names the file and line), -ENOMEM.
 */
LC_EXTERN int lc_sshconfig_print(char **out, const char *ssh_config, const char *host);

/** A runtime for this machine, through local processes (no sshd). opts may be NULL. */
LC_EXTERN int lc_runtime_new_local(lc_runtime **out, lc_engine *engine,
                                   const lc_runtime_options *opts);

/**
 * Ends every process started through the runtime (their lifelines end their process groups),
 * removes its working directory unless kept, closes the connection and frees it. NULL is fine.
 */
LC_EXTERN void lc_runtime_free(lc_runtime *rt);

/** The runtime's name: the ssh alias or host as given, or "localhost". Borrowed. */
LC_EXTERN const char *lc_runtime_name(const lc_runtime *rt);

/** Non-zero while the runtime's connection is up. */
LC_EXTERN int lc_runtime_is_connected(const lc_runtime *rt);

typedef enum lc_stream { LC_STDOUT = 1, LC_STDERR = 2 } lc_stream;

/**
 * Receives one whole line of output, without its newline, NUL-terminated (len excludes the NUL).
 * A last line without a newline is delivered when the stream ends; a line longer than 1 MiB
 * arrives in 1 MiB pieces. Runs on the engine thread.
 */
typedef void (*lc_line_cb)(const char *line, size_t len, lc_stream stream, void *payload);

#define LC_EXEC_OPTIONS_VERSION 3

/** Options of one command. A zero field means the default. */
typedef struct lc_exec_options {
  unsigned int version;
  /** NULL-terminated array of "NAME=VALUE"; values may hold any bytes but NUL. */
  const char *const *env;
  /** Working directory on the host; NULL means the login directory. */
  const char *cwd;
  /** Output lines; NULL discards output (it is still read, so the process never stalls). */
  lc_line_cb on_line;
  void *payload;
  /** lc_runtime_exec only: end the command after this many ms (-ETIMEDOUT); 0 means no limit. */
  int timeout_ms;
  /**
   * Version 2. A short name for the process, shown in the host's process list after the host's
   * name (`/bin/sh -s lc-lifeline lab3 worker-5`); characters other than letters, digits and
   * `._-@:` show as `_`. NULL: none. No value ever travels in a command line: the working
   * directory, the environment and the command reach the host through the channel.
   */
  const char *label;
  /* version 3 */
  /**
   * lc_runtime_spawn only (ignored by lc_runtime_exec and groups): non-zero gives the command a
   * stdin that lc_process_write_line feeds (through its lifeline's channel, so it costs no second
   * channel; on the host a FIFO whose directory is removed before the command starts); zero (the
   * default) gives it /dev/null. The command's stdin ends (EOF) at lc_process_close_input; a stop
   * ends it as any other command (SIGTERM, grace, SIGKILL) with its stdin still open. The command
   * must read what it is sent: while it leaves more than the host's pipe buffer (64 KiB on Linux)
   * unread, the lifeline's heartbeats and a stop wait behind it, and after the runtime's heartbeat
   * timeout of that the lifeline ends the command (a worker that is sent one line at a time and
   * answers it never gets there).
   */
  int input;
} lc_exec_options;

#define LC_EXEC_OPTIONS_INIT                                                                       \
  { .version = LC_EXEC_OPTIONS_VERSION }

/** Initialises opts to the defaults. */
LC_EXTERN void lc_exec_options_init(lc_exec_options *opts);

/** How a command ended. */
typedef struct lc_exec_result {
  /** Exit status 0-255, or -1 when a signal ended it. */
  int exit_status;
  /** The signal that ended it (SIGKILL, ...), or 0. */
  int signal;
} lc_exec_result;

/**
 * Runs command with /bin/sh on the host under a lifeline and waits for it to end.
 * A non-zero exit is not an error: it is reported in out. opts may be NULL.
 * Returns 0, -ETIMEDOUT (the command was ended), LC_ECLOSED (the connection dropped).
 */
LC_EXTERN int lc_runtime_exec(lc_exec_result *out, lc_runtime *rt, const char *command,
                              const lc_exec_options *opts);

/**
 * Starts command under a lifeline and returns at once. The process group ends when it is stopped,
 * when lc_process_free or lc_runtime_free is called, when the connection closes, or when the
 * heartbeat has been silent for the runtime's heartbeat timeout. opts->timeout_ms is ignored.
 */
LC_EXTERN int lc_runtime_spawn(lc_process **out, lc_runtime *rt, const char *command,
                               const lc_exec_options *opts);

/**
 * Waits up to timeout_ms (negative: forever) for the process to end.
 * Returns 0 with out filled, -ETIMEDOUT when it still runs, LC_ECLOSED when the connection dropped.
 */
LC_EXTERN int lc_process_wait(lc_exec_result *out, lc_process *proc, int timeout_ms);

/** The process's pid on its host: the process group leader its lifeline started (the command's
 * shell, or the command itself after an exec), 0 while not known yet or without a lifeline. */
LC_EXTERN long lc_process_pid(const lc_process *proc);

/**
 * Writes one line (len bytes, without its newline; the newline is added) into the stdin of a
 * process spawned with lc_exec_options.input. Returns once the line is queued, in order with the
 * process's other lines; the command reads it when it reads its stdin. Returns 0, -EINVAL (the
 * process has no input, or line holds a newline or a NUL), -EPIPE (its input was closed),
 * LC_ECLOSED (the process ended or its host was lost).
 */
LC_EXTERN int lc_process_write_line(lc_process *proc, const char *line, size_t len);

/** Ends the stdin of a process spawned with lc_exec_options.input (it reads EOF after the lines
 * written before); the process runs on. Returns 0, -EINVAL (no input), LC_ECLOSED. */
LC_EXTERN int lc_process_close_input(lc_process *proc);

/** Asks the lifeline to end the process group (SIGTERM, grace period, SIGKILL). Returns at once. */
LC_EXTERN int lc_process_stop(lc_process *proc);

/** Stops the process if it still runs and frees the handle at once (its lifeline ends its process
 * group on the host after that: a cluster's teardown awaits those ends, lc_cluster_free); no
 * callback runs after it. NULL is fine. */
LC_EXTERN void lc_process_free(lc_process *proc);

/**
 * Sends a local file to the host, atomically (temporary name, then rename) and with its mode.
 * A failed transfer leaves no file, partial or temporary. timeout_ms 0 means no limit.
 * Returns 0, -ENOENT (local file), LC_EREMOTE (remote side failed; detail has its message).
 */
LC_EXTERN int lc_runtime_send_file(lc_runtime *rt, const char *local_path, const char *remote_path,
                                   int timeout_ms);

/** Fetches a file from the host to local_path, atomically and with its mode less the setuid,
 * setgid and sticky bits (as OpenSSH drops them). Errors as above. */
LC_EXTERN int lc_runtime_get_file(lc_runtime *rt, const char *remote_path, const char *local_path,
                                  int timeout_ms);

/** Writes len bytes from memory into a file on the host, atomically, with the given mode (0:
 * 0600). The temporary file is made new (O_EXCL), so that a planted symlink cannot redirect it. */
LC_EXTERN int lc_runtime_write_file(lc_runtime *rt, const char *remote_path, const void *data,
                                    size_t len, unsigned int mode, int timeout_ms);

/**
 * The runtime's working directory on the host, created on first use under the workdir root.
 * Borrowed; valid until the runtime is freed.
 */
LC_EXTERN int lc_runtime_workdir(const char **out, lc_runtime *rt);

/**
 * Declares what the host offers for worker placement: gpus (-1: unknown, taken as none) and
 * worker slots (0: not declared). Discovery sets both from the facts and the inventory.
 */
LC_EXTERN void lc_runtime_set_resources(lc_runtime *rt, int gpus, int slots);

/** GPUs declared or found for placement, -1 when unknown. */
LC_EXTERN int lc_runtime_gpus(const lc_runtime *rt);

/** Worker slots declared for placement, 0 when not declared. */
LC_EXTERN int lc_runtime_slots(const lc_runtime *rt);

/**
 * Quotes arg for a POSIX shell ('it'\''s'), for building a command from arguments.
 * Free *out with lc_free. Returns 0 or -ENOMEM.
 */
LC_EXTERN int lc_shell_quote(char **out, const char *arg);

#ifdef __cplusplus
}
#endif
#endif /* LAZYCLUSTER_RUNTIME_H */
