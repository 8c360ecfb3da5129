/*
 * custom_cluster.c - a complete custom cluster type in C: a job server and its (GPU) workers.
 *
 * A lazycluster cluster type is two strategy structs (include/lazycluster/cluster.h):
 *   lc_master_launcher  what to run as the master (a `command` method; optional `wait_ready`),
 *   lc_worker_launcher  what to run as each worker (a `command`, an optional `wait_ready`, flags).
 * The library does the rest the same way for every type: free ports, placement (one worker per
 * GPU or declared slot, spread over the hosts by default), each worker's context (LAZYCLUSTER_*
 * variables, CUDA_VISIBLE_DEVICES, cluster.json), readiness, the SSH tunnels and the cleanup.
 *
 * This one program is all three parts of the example, chosen by argv[1]:
 *
 *   custom_cluster [-F SSH_CONFIG] [-n WORKERS] [HOST...]   the launcher (this file's main part)
 *   custom_cluster master PORT                               the job server
 *   custom_cluster worker                                    a worker
 *
 * The job: the dot product of two vectors of 2^24 floats, x[i] = i % 13 and y[i] = i % 11,
 * cut into 256 work items of 65536 elements. The master hands the items out and sums the
 * results; each worker computes its items on its GPU through the CUDA runtime when it has one,
 * else on the CPU. The launcher checks the total against the exact value.
 *
 *   - The master is a libuv TCP server on 127.0.0.1:PORT on this machine. The cluster exposes that
 *     port on every host through an SSH remote forward, so a worker anywhere reaches it as
 *     localhost:$LAZYCLUSTER_MASTER_PORT. Nothing listens on a public address.
 *   - Workers listen on nothing: the worker launcher is `portless`, and its `wait_ready` says the
 *     workers are up once the master has printed a "joined:" line for each of them.
 *   - The worker launcher's prepare_host sends this very binary into each host's working
 *     directory (a send step of the host's task; the cluster runs every host's at once, while
 *     the master starts), so the hosts need nothing of ours installed;
 *     they do need the shared libraries it links (libuv1, libssh-4: `ldd custom_cluster`).
 *   - lc_cluster_wait returns when the first process of the cluster ends. Workers that are done
 *     stay until the cluster stops them, so in a good run that first process is the master, which
 *     exits once every result is in.
 *
 * Exactness: every x[i] * y[i] is an integer below 121 and a work item sums 65536 of them, so
 * every partial sum is an integer below 2^24 = 16777216 and is exact in single precision, in any
 * order of summation: cuBLAS's sdot (float) is exact here, and the CPU path sums in int64. The
 * master adds the items' results as int64; the launcher computes the exact value independently
 * from the period of the sequence (13 * 11 = 143).
 *
 * GPU: the CUDA runtime (libcudart) and cuBLAS (libcublas) are loaded with dlopen at run time, so
 * the build needs no CUDA and the binary runs where there is none. A worker uses its GPU when
 * libcudart loads and cudaGetDeviceCount finds a device: it copies its vectors to the device
 * (cudaMalloc/cudaMemcpy) and runs cublasSdot there; without cuBLAS it copies them back and sums
 * on the CPU (a device round trip, CPU arithmetic). Any CUDA failure falls back to the CPU for
 * the rest of the run. Each worker prints "compute: ..." with what it uses and why.
 * LC_CUDART_PATH (also read by the library's GPU probe) and LC_CUBLAS_PATH name the libraries to
 * load instead; the launcher passes them on to every process of the cluster.
 *
 * What was run (CI and by hand, on a machine with the CUDA 13 toolkit but no GPU and no driver;
 * tests/integration.custom_cluster.cmake):
 *   - 3 test hosts, 6 workers: libcudart loads, cudaGetDeviceCount reports error 35 (no driver),
 *     the workers compute on the CPU;
 *   - this machine alone with LC_CUDART_PATH pointing nowhere: no CUDA runtime at all, CPU;
 *   - this machine alone with a stand-in CUDA runtime and cuBLAS
 *     (tests/integration/fake_cuda_compute.c: "device" memory is host memory whose every use is
 *     checked: copy directions and sizes, sdot on device vectors into a host result): the GPU
 *     code below runs through cudaMalloc, cudaMemcpy and cublasSdot_v2, through the round trip
 *     without cuBLAS, and through the fall back to the CPU when copies fail.
 *   - this machine alone on an NVIDIA H100 (2026-11-27, CUDA 13 runtime and cuBLAS, driver
 *     580): "compute: GPU 0 via CUDA 13.0 (cublasSdot)" and, without cuBLAS, the device round
 *     trip; both exact (docs/gpus.md).
 * What was NOT run: hosts with GPUs over SSH, more than one GPU.
 *
 * Protocol between master and workers, one text line each way. First both prove that they know
 * the cluster's secret (LAZYCLUSTER_SECRET_FILE, a 0600 file the cluster wrote into each
 * process's 0700 directory), each to a fresh random challenge of the other, so that another user
 * of a host, who can reach the master's port there through its SSH tunnel, gets nothing, and a
 * worker never works for a stranger who took the port first:
 *   master: CHALLENGE <cs>                   cs fresh from lc_secret_new
 *   worker: AUTH <proof> <cc>                proof = lc_secret_proof(secret, "client", cs)
 *   master: PROOF <proof>                    lc_secret_proof(secret, "server", cc)
 * Either side closes on a wrong proof (compared with lc_secret_equal); the master logs it.
 *   worker: HELLO <index> <count> <host> <how it computes>
 *   master: WORK <item> <first> <end>        compute elements [first, end)
 *   worker: RESULT <item> <value>            (and is given the next item)
 *   master: DONE                             every item is in: nothing more to do
 * A worker that leaves with an item gives the item back to the queue.
 */
#include <lazycluster.h>

#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

/* ==== the job ================================================================================ */

#define TOTAL (1L << 24)        /* elements of each vector */
#define CHUNK (1L << 16)        /* elements per work item: TOTAL / CHUNK = 256 items */
#define BINARY "custom_cluster" /* this program's name in each host's working directory */

static float xval(long i) { return (float)(i % 13); }
static float yval(long i) { return (float)(i % 11); }

/* The exact dot product of the first n elements: (i % 13) * (i % 11) repeats every 143. */
static int64_t exact_dot(long n) {
  int64_t period = 0, rest = 0;
  for (long i = 0; i < 143; i++)
    period += (i % 13) * (i % 11);
  for (long i = 0; i < n % 143; i++)
    rest += (i % 13) * (i % 11);
  return (int64_t)(n / 143) * period + rest;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ==== a worker's arithmetic: the CUDA runtime when it works, else the CPU ==================== */

/* The few CUDA runtime and cuBLAS entry points we use, with their C ABI: cudaError_t,
 * cudaMemcpyKind and cublasStatus_t are C enums (int); cublasHandle_t is a pointer. */
enum { CUDA_MEMCPY_HOST_TO_DEVICE = 1, CUDA_MEMCPY_DEVICE_TO_HOST = 2 };

typedef struct compute {
  void *cudart, *cublas;
  int (*GetDeviceCount)(int *count);
  int (*SetDevice)(int device);
  int (*RuntimeGetVersion)(int *version);
  int (*Malloc)(void **ptr, size_t size);
  int (*Memcpy)(void *dst, const void *src, size_t count, int kind);
  int (*Free)(void *ptr);
  const char *(*GetErrorString)(int error);
  int (*BlasCreate)(void **handle);
  int (*BlasDestroy)(void *handle);
  int (*BlasSdot)(void *handle, int n, const float *x, int incx, const float *y, int incy,
                  float *result);
  void *blas;     /* the cuBLAS handle, or NULL */
  float *dx, *dy; /* device buffers of CHUNK floats */
  float *x, *y;   /* host buffers of CHUNK floats */
  int gpu;        /* non-zero: items go through the GPU */
  char how[512];  /* what computes, and why: printed and sent to the master */
} compute;

/* dlsym into a function pointer (ISO C has no cast between the two pointer kinds). */
static int load_sym(void *lib, const char *name, void *fn) {
  void *p = dlsym(lib, name);
  if (p == NULL)
    return -1;
  memcpy(fn, &p, sizeof(p));
  return 0;
}

/* dlopen the first of names that loads, or the file in env_var when it is set. */
static void *load_lib(const char *env_var, const char *const *names, char *why, size_t size) {
  const char *forced = getenv(env_var);
  void *lib = NULL;
  if (forced != NULL && *forced != '\0') {
    if ((lib = dlopen(forced, RTLD_NOW | RTLD_LOCAL)) == NULL)
      snprintf(why, size, "%s", dlerror());
    return lib;
  }
  for (size_t i = 0; names[i] != NULL && lib == NULL; i++)
    if ((lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)) == NULL)
      snprintf(why, size, "%s", dlerror());
  return lib;
}

static const char *cuda_error(compute *g, int e) {
  const char *s = g->GetErrorString != NULL ? g->GetErrorString(e) : NULL;
  return s != NULL ? s : "unknown error";
}

static void compute_open(compute *g) {
  static const char *const cudart_names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                             "libcudart.so.11.0", NULL};
  static const char *const cublas_names[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12",
                                             "libcublas.so.11", NULL};
  const char *visible = getenv("CUDA_VISIBLE_DEVICES");
  char why[256] = "", gpu[64];
  int count = 0, version = 0, e;

  memset(g, 0, sizeof(*g));
  if ((g->x = malloc(CHUNK * sizeof(float))) == NULL ||
      (g->y = malloc(CHUNK * sizeof(float))) == NULL) {
    fprintf(stderr, "worker: out of memory\n");
    exit(1);
  }
  if ((g->cudart = load_lib("LC_CUDART_PATH", cudart_names, why, sizeof(why))) == NULL) {
    snprintf(g->how, sizeof(g->how), "CPU (no CUDA runtime: %s)", why);
    return;
  }
  if (load_sym(g->cudart, "cudaGetDeviceCount", &g->GetDeviceCount) < 0 ||
      load_sym(g->cudart, "cudaSetDevice", &g->SetDevice) < 0 ||
      load_sym(g->cudart, "cudaRuntimeGetVersion", &g->RuntimeGetVersion) < 0 ||
      load_sym(g->cudart, "cudaMalloc", &g->Malloc) < 0 ||
      load_sym(g->cudart, "cudaMemcpy", &g->Memcpy) < 0 ||
      load_sym(g->cudart, "cudaFree", &g->Free) < 0 ||
      load_sym(g->cudart, "cudaGetErrorString", &g->GetErrorString) < 0) {
    snprintf(g->how, sizeof(g->how), "CPU (the CUDA runtime lacks a function: %s)", dlerror());
    return;
  }
  g->RuntimeGetVersion(&version);
  /* 35: no driver, or one older than the runtime; 100: a driver but no GPU */
  if ((e = g->GetDeviceCount(&count)) != 0 || count < 1) {
    snprintf(g->how, sizeof(g->how),
             "CPU (CUDA runtime %d.%d loaded, no usable GPU: cudaGetDeviceCount %s%d%s%s)",
             version / 1000, version % 1000 / 10, e ? "error " : "found ", e ? e : count,
             e ? ": " : "", e ? cuda_error(g, e) : "");
    return;
  }
  /* CUDA_VISIBLE_DEVICES (set by the cluster to this worker's GPU) makes it device 0 here */
  snprintf(gpu, sizeof(gpu), "GPU %s", visible != NULL ? visible : "0");
  if ((e = g->SetDevice(0)) != 0 || (e = g->Malloc((void **)&g->dx, CHUNK * sizeof(float))) != 0 ||
      (e = g->Malloc((void **)&g->dy, CHUNK * sizeof(float))) != 0) {
    snprintf(g->how, sizeof(g->how), "CPU (%s: cannot use it: error %d: %s)", gpu, e,
             cuda_error(g, e));
    return;
  }
  g->gpu = 1;
  if ((g->cublas = load_lib("LC_CUBLAS_PATH", cublas_names, why, sizeof(why))) == NULL) {
    snprintf(g->how, sizeof(g->how),
             "%s via CUDA %d.%d (device round trip; arithmetic on the CPU: no cuBLAS: %s)", gpu,
             version / 1000, version % 1000 / 10, why);
    return;
  }
  if (load_sym(g->cublas, "cublasCreate_v2", &g->BlasCreate) < 0 ||
      load_sym(g->cublas, "cublasDestroy_v2", &g->BlasDestroy) < 0 ||
      load_sym(g->cublas, "cublasSdot_v2", &g->BlasSdot) < 0 ||
      (e = g->BlasCreate(&g->blas)) != 0) {
    g->blas = NULL;
    snprintf(g->how, sizeof(g->how),
             "%s via CUDA %d.%d (device round trip; arithmetic on the CPU: cuBLAS unusable)", gpu,
             version / 1000, version % 1000 / 10);
    return;
  }
  snprintf(g->how, sizeof(g->how), "%s via CUDA %d.%d (cublasSdot)", gpu, version / 1000,
           version % 1000 / 10);
}

static int64_t dot_host(const float *x, const float *y, long n) {
  int64_t s = 0;
  for (long i = 0; i < n; i++)
    s += (int64_t)x[i] * (int64_t)y[i];
  return s;
}

static void fill(compute *g, long first, long n) {
  for (long i = 0; i < n; i++) {
    g->x[i] = xval(first + i);
    g->y[i] = yval(first + i);
  }
}

/* The dot product of elements [first, end), through the GPU when there is one. */
static int64_t compute_item(compute *g, long first, long end) {
  long n = end - first;
  size_t bytes = (size_t)n * sizeof(float);
  const char *failed;
  float r = 0;
  int e;
  fill(g, first, n);
  if (!g->gpu)
    return dot_host(g->x, g->y, n);
  if ((e = g->Memcpy(g->dx, g->x, bytes, CUDA_MEMCPY_HOST_TO_DEVICE)) != 0 ||
      (e = g->Memcpy(g->dy, g->y, bytes, CUDA_MEMCPY_HOST_TO_DEVICE)) != 0) {
    failed = "cudaMemcpy to the device";
  } else if (g->blas != NULL) {
    /* the result lands in host memory (the default pointer mode): sdot waits for it */
    if ((e = g->BlasSdot(g->blas, (int)n, g->dx, 1, g->dy, 1, &r)) == 0)
      return (int64_t)r; /* an integer below 2^24: exact (see the top of the file) */
    fprintf(stderr, "worker: cublasSdot failed with status %d: the CPU takes over\n", e);
    failed = NULL;
  } else if ((e = g->Memcpy(g->x, g->dx, bytes, CUDA_MEMCPY_DEVICE_TO_HOST)) != 0 ||
             (e = g->Memcpy(g->y, g->dy, bytes, CUDA_MEMCPY_DEVICE_TO_HOST)) != 0) {
    failed = "cudaMemcpy from the device";
  } else {
    return dot_host(g->x, g->y, n); /* the values made the round trip through the GPU */
  }
  if (failed != NULL)
    fprintf(stderr, "worker: %s failed: error %d: %s: the CPU takes over\n", failed, e,
            cuda_error(g, e));
  g->gpu = 0;
  fill(g, first, n); /* a failed copy may have left anything in the buffers */
  return dot_host(g->x, g->y, n);
}

static void compute_close(compute *g) {
  if (g->blas != NULL)
    g->BlasDestroy(g->blas);
  if (g->dx != NULL)
    g->Free(g->dx);
  if (g->dy != NULL)
    g->Free(g->dy);
  /* the libraries stay loaded: unloading the CUDA runtime at exit is not worth the trouble */
  free(g->x);
  free(g->y);
}

/* ==== the worker ============================================================================= */

typedef struct conn {
  int fd;
  char buf[1024];
  size_t len;
} conn;

/* Reads one line (without its newline) into out: 1, or 0 at the end, -1 on an error. */
static int conn_read_line(conn *c, char *out, size_t size) {
  for (;;) {
    char *nl = memchr(c->buf, '\n', c->len);
    ssize_t n;
    if (nl != NULL) {
      size_t k = (size_t)(nl - c->buf);
      snprintf(out, size, "%.*s", (int)k, c->buf);
      memmove(c->buf, nl + 1, c->len - k - 1);
      c->len -= k + 1;
      return 1;
    }
    if (c->len == sizeof(c->buf))
      return -1; /* a line longer than our buffer: not our protocol */
    do
      n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
      return n == 0 ? 0 : -1;
    c->len += (size_t)n;
  }
}

static int conn_printf(conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int conn_printf(conn *c, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof(line))
    return -1;
  for (int off = 0; off < n;) {
    ssize_t k = send(c->fd, line + off, (size_t)(n - off), MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    off += (int)k;
  }
  return 0;
}

/* Connects to host:port, trying each address it resolves to (localhost may be ::1 and 127.0.0.1).
 */
static int connect_to(const char *host, const char *port) {
  struct addrinfo hints, *res = NULL;
  int fd = -1, e;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if ((e = getaddrinfo(host, port, &hints, &res)) != 0) {
    fprintf(stderr, "worker: cannot resolve %s: %s\n", host, gai_strerror(e));
    return -1;
  }
  for (struct addrinfo *a = res; a != NULL && fd < 0; a = a->ai_next) {
    if ((fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol)) < 0)
      continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
      e = errno;
      close(fd);
      fd = -1;
      errno = e;
    }
  }
  if (fd < 0)
    fprintf(stderr, "worker: cannot connect to the master at %s:%s: %s\n", host, port,
            strerror(errno));
  freeaddrinfo(res);
  return fd;
}

/* The cluster's secret, from the file the cluster wrote for this process. who: "master" or
 * "worker", for the message. NULL when it cannot be read (the message says why). */
static char *read_secret(const char *who) {
  const char *path = getenv("LAZYCLUSTER_SECRET_FILE");
  char *secret = NULL;
  if (lc_secret_read(&secret, path) < 0)
    fprintf(stderr, "%s: cannot read the cluster's secret: %s\n", who, lc_error_last());
  return secret;
}

/* The worker's half of the handshake: proves it knows secret, and has the master prove it too.
 * 0, or -1 with the reason printed. */
static int worker_authenticate(conn *c, const char *secret) {
  char line[256], cs[128], theirs[128], *proof = NULL, *mine = NULL, *want = NULL;
  int r = -1;
  if (conn_read_line(c, line, sizeof(line)) <= 0 || sscanf(line, "CHALLENGE %127s", cs) != 1) {
    fprintf(stderr, "worker: the master sent no challenge: not our master\n");
    goto out;
  }
  if (lc_secret_proof(&proof, secret, "client", cs) < 0 || lc_secret_new(&mine) < 0 ||
      lc_secret_proof(&want, secret, "server", mine) < 0) {
    fprintf(stderr, "worker: %s\n", lc_error_last());
    goto out;
  }
  if (conn_printf(c, "AUTH %s %s\n", proof, mine) < 0 ||
      conn_read_line(c, line, sizeof(line)) <= 0) {
    fprintf(stderr, "worker: the master closed the connection: it refused our proof\n");
    goto out;
  }
  if (sscanf(line, "PROOF %127s", theirs) != 1 || !lc_secret_equal(theirs, want)) {
    fprintf(stderr, "worker: the server on the master's port did not prove that it knows the "
                    "cluster's secret: not our master; leaving\n");
    goto out;
  }
  r = 0;
out:
  lc_free(proof);
  lc_free(mine);
  lc_free(want);
  return r;
}

/* A worker's work with the master at port: 0 when the master said DONE, else 1 (said why). */
static int worker_session(compute *g, const char *addr, const char *port, const char *index,
                          const char *count, const char *host, char *secret) {
  conn c = {.fd = -1};
  char line[256];
  int items = 0, r;

  if ((c.fd = connect_to(addr != NULL ? addr : "localhost", port)) < 0)
    return 1;
  r = worker_authenticate(&c, secret);
  if (r < 0)
    goto fail;
  if (conn_printf(&c, "HELLO %s %s %s %s\n", index, count, host != NULL ? host : "?", g->how) < 0)
    goto lost;
  while ((r = conn_read_line(&c, line, sizeof(line))) > 0) {
    long item, first, end;
    if (strcmp(line, "DONE") == 0)
      break;
    if (sscanf(line, "WORK %ld %ld %ld", &item, &first, &end) != 3 || first < 0 || end <= first ||
        end - first > CHUNK) {
      fprintf(stderr, "worker: the master said \"%s\": not our protocol\n", line);
      goto fail;
    }
    if (conn_printf(&c, "RESULT %ld %lld\n", item, (long long)compute_item(g, first, end)) < 0)
      goto lost;
    items++;
  }
  if (r <= 0) {
    fprintf(stderr, "worker: lost the master after %d items: %s\n", items,
            r == 0 ? "it closed the connection" : strerror(errno));
    goto fail;
  }
  close(c.fd);
  printf("done: %d items; staying until the cluster stops me\n", items);
  fflush(stdout);
  return 0;
lost:
  fprintf(stderr, "worker: lost the master after %d items: %s\n", items, strerror(errno));
fail:
  close(c.fd);
  return 1;
}

static int run_worker(void) {
  const char *addr = getenv("LAZYCLUSTER_MASTER_ADDR"), *port = getenv("LAZYCLUSTER_MASTER_PORT");
  const char *index = getenv("LAZYCLUSTER_WORKER_INDEX"),
             *count = getenv("LAZYCLUSTER_WORKER_COUNT");
  const char *host = getenv("LAZYCLUSTER_HOST");
  compute g;
  char *secret = NULL;
  int r;

  if (port == NULL || index == NULL || count == NULL) {
    fprintf(stderr, "worker: LAZYCLUSTER_MASTER_PORT, _WORKER_INDEX and _WORKER_COUNT are not set:"
                    " a worker runs inside a lazycluster cluster\n");
    return 2;
  }
  if ((secret = read_secret("worker")) == NULL)
    return 2;
  compute_open(&g);
  printf("compute: %s\n", g.how);
  fflush(stdout);
  r = worker_session(&g, addr, port, index, count, host, secret);
  lc_free(secret);
  compute_close(&g); /* its buffers and devices go on every way out */
  if (r != 0)
    return r;
  /* Like any process of a cluster, a worker ends when the cluster stops it (lc_cluster_free
   * ends its process group). Leaving now would make it, not the master, the first process of
   * the cluster to end, which is what lc_cluster_wait reports. */
  for (;;)
    pause();
}

/* ==== the master: a job server on libuv ====================================================== */

typedef struct client {
  uv_tcp_t tcp; /* first: a handle's address is its client's */
  struct client *next;
  char in[1024];
  size_t inlen;
  int index; /* the worker's index; -1 until its HELLO */
  char host[64];
  char how[512];
  long item;  /* the item it computes, or -1 */
  int items;  /* items it returned */
  int parked; /* waiting for an item (before the start, or while the last items are out) */
  int closing;
  int authenticated;  /* it proved it knows the secret; nothing else is heard before */
  char challenge[80]; /* ours to it */
} client;

typedef struct wreq {
  uv_write_t req;
  client *c;
  int close_after;
  char data[];
} wreq;

enum { ITEM_PENDING, ITEM_OUT, ITEM_DONE };

static struct master {
  uv_loop_t *loop;
  uv_tcp_t server;
  long nitems, ndone;
  unsigned char *state;
  int64_t sum;
  int expected, joined, started, finished;
  client *clients;
  char *secret; /* the cluster's (LAZYCLUSTER_SECRET_FILE) */
  int refused;  /* connections refused */
} M;

static void client_close(client *c);

static void on_written(uv_write_t *req, int status) {
  wreq *w = (wreq *)req;
  if (status < 0 || w->close_after)
    client_close(w->c);
  free(w);
}

static void send_line(client *c, int close_after, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void send_line(client *c, int close_after, const char *fmt, ...) {
  char line[256];
  va_list ap;
  int n;
  wreq *w;
  uv_buf_t b;
  if (c->closing)
    return;
  va_start(ap, fmt);
  n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof(line) || (w = malloc(sizeof(*w) + (size_t)n)) == NULL) {
    client_close(c);
    return;
  }
  memcpy(w->data, line, (size_t)n);
  w->c = c;
  w->close_after = close_after;
  b = uv_buf_init(w->data, (unsigned int)n);
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) {
    free(w);
    client_close(c);
  }
}

/* Gives c the next pending item, DONE when all are in, or parks it until an item comes back. */
static void dispatch(client *c) {
  if (c->closing)
    return;
  if (M.finished) {
    send_line(c, 1, "DONE\n");
    return;
  }
  if (!M.started) {
    c->parked = 1;
    return;
  }
  /* a linear scan: 256 items; a real server would keep a queue */
  for (long i = 0; i < M.nitems; i++)
    if (M.state[i] == ITEM_PENDING) {
      long end = (i + 1) * CHUNK < TOTAL ? (i + 1) * CHUNK : TOTAL;
      M.state[i] = ITEM_OUT;
      c->item = i;
      c->parked = 0;
      send_line(c, 0, "WORK %ld %ld %ld\n", i, i * CHUNK, end);
      return;
    }
  c->parked = 1; /* the last items are out: one may come back if its worker leaves */
}

static void wake_parked(void) {
  for (client *c = M.clients; c != NULL; c = c->next)
    if (c->parked && !c->closing)
      dispatch(c);
}

/* Every result is in: the summary, DONE to every worker, and the loop runs dry. */
static void finish(void) {
  M.finished = 1;
  for (client *c = M.clients; c != NULL; c = c->next)
    if (c->index >= 0)
      printf("worker-%d on %s: %d items, %s\n", c->index, c->host, c->items, c->how);
  printf("result: %lld\n", (long long)M.sum);
  fflush(stdout);
  for (client *c = M.clients; c != NULL; c = c->next)
    send_line(c, 1, "DONE\n");
  uv_close((uv_handle_t *)&M.server, NULL);
}

static void on_client_closed(uv_handle_t *h) {
  client *c = (client *)h, **p;
  for (p = &M.clients; *p != NULL && *p != c; p = &(*p)->next)
    ;
  if (*p != NULL)
    *p = c->next;
  if (c->item >= 0 && M.state[c->item] == ITEM_OUT) { /* it left with an item: back it goes */
    M.state[c->item] = ITEM_PENDING;
    fprintf(stderr, "master: worker-%d left with item %ld: it goes to another worker\n", c->index,
            c->item);
    wake_parked();
  }
  free(c);
}

static void client_close(client *c) {
  if (c->closing)
    return;
  c->closing = 1;
  uv_close((uv_handle_t *)&c->tcp, on_client_closed);
}

/* The first line of a connection: "AUTH <proof> <challenge>". A good proof is answered with
 * ours; anything else is refused (closed, and logged without what it sent). */
static void authenticate(client *c, const char *line) {
  char proof[128], theirs[128], *want = NULL, *ours = NULL;
  const char *why = NULL;
  if (sscanf(line, "AUTH %127s %127s", proof, theirs) != 2)
    why = "it did not authenticate (it may not know the cluster's secret)";
  else if (lc_secret_proof(&want, M.secret, "client", c->challenge) < 0 ||
           lc_secret_proof(&ours, M.secret, "server", theirs) < 0)
    why = lc_error_last();
  else if (!lc_secret_equal(proof, want))
    why = "wrong proof: it does not know the cluster's secret";
  if (why != NULL) {
    M.refused++;
    fprintf(stderr, "master: refused a connection: %s\n", why);
    client_close(c);
  } else {
    c->authenticated = 1;
    send_line(c, 0, "PROOF %s\n", ours);
  }
  lc_free(want);
  lc_free(ours);
}

static void handle_line(client *c, char *line) {
  long item;
  long long value;
  int index, count, consumed = 0;
  char host[64];

  if (!c->authenticated) {
    authenticate(c, line);
    return;
  }
  if (sscanf(line, "HELLO %d %d %63s %n", &index, &count, host, &consumed) == 3 && consumed > 0 &&
      c->index < 0 && index >= 0 && count > 0) {
    c->index = index;
    snprintf(c->host, sizeof(c->host), "%s", host);
    snprintf(c->how, sizeof(c->how), "%s", line + consumed);
    M.joined++;
    if (count > M.expected)
      M.expected = count;
    /* the launcher counts these lines: they are its workers' readiness */
    printf("joined: worker-%d on %s (%d of %d)\n", index, c->host, M.joined, M.expected);
    fflush(stdout);
    if (!M.started && M.joined >= M.expected) {
      /* everyone waits for everyone, so that every worker gets work */
      M.started = 1;
      printf("all %d workers joined: %ld items of %ld elements\n", M.joined, M.nitems, CHUNK);
      fflush(stdout);
      wake_parked();
    }
    dispatch(c);
  } else if (sscanf(line, "RESULT %ld %lld", &item, &value) == 2 && item == c->item && item >= 0 &&
             M.state[item] == ITEM_OUT) {
    M.state[item] = ITEM_DONE;
    M.sum += value;
    M.ndone++;
    c->items++;
    c->item = -1;
    if (M.ndone == M.nitems)
      finish();
    else
      dispatch(c);
  } else {
    fprintf(stderr, "master: worker-%d said \"%.80s\": not our protocol; closing it\n", c->index,
            line);
    client_close(c);
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  client *c = (client *)h;
  (void)suggested;
  *buf = uv_buf_init(c->in + c->inlen, (unsigned int)(sizeof(c->in) - c->inlen));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  client *c = (client *)s;
  char *nl;
  (void)buf;
  if (nread < 0) { /* the end (UV_EOF), an error, or a line longer than our buffer (UV_ENOBUFS) */
    /* a connection that ends before its hello is no worker: lazycluster's readiness probe (a
     * connect, closed at once) or a port scanner; only a worker's end is worth a line */
    if (nread != UV_EOF && !M.finished && c->index >= 0)
      fprintf(stderr, "master: worker-%d: %s\n", c->index, uv_strerror((int)nread));
    client_close(c);
    return;
  }
  c->inlen += (size_t)nread;
  while (!c->closing && (nl = memchr(c->in, '\n', c->inlen)) != NULL) {
    size_t k = (size_t)(nl - c->in);
    *nl = '\0';
    handle_line(c, c->in);
    memmove(c->in, nl + 1, c->inlen - k - 1);
    c->inlen -= k + 1;
  }
}

static void free_handle(uv_handle_t *h) { free(h); }

static void on_connection(uv_stream_t *server, int status) {
  client *c;
  char *challenge = NULL;
  if (status < 0 || (c = calloc(1, sizeof(*c))) == NULL)
    return;
  c->index = -1;
  c->item = -1;
  uv_tcp_init(M.loop, &c->tcp);
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0 || lc_secret_new(&challenge) < 0) {
    uv_close((uv_handle_t *)&c->tcp, free_handle);
    return;
  }
  snprintf(c->challenge, sizeof(c->challenge), "%s", challenge); /* fresh for each connection */
  lc_free(challenge);
  uv_tcp_nodelay(&c->tcp, 1);
  c->next = M.clients;
  M.clients = c;
  send_line(c, 0, "CHALLENGE %s\n", c->challenge);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static int run_master(const char *port_arg) {
  struct sockaddr_in addr;
  char *end;
  long port = strtol(port_arg, &end, 10);
  int r;

  if (*end != '\0' || port < 1 || port > 65535) {
    fprintf(stderr, "master: bad port %s\n", port_arg);
    return 2;
  }
  if ((M.secret = read_secret("master")) == NULL)
    return 2;
  signal(SIGPIPE, SIG_IGN);
  M.loop = uv_default_loop();
  M.nitems = (TOTAL + CHUNK - 1) / CHUNK;
  if ((M.state = calloc((size_t)M.nitems, 1)) == NULL)
    return 1;
  uv_ip4_addr("127.0.0.1", (int)port, &addr);
  uv_tcp_init(M.loop, &M.server);
  /* libuv may report a taken port at bind or at listen; "in use" in our message lets the cluster
   * try another port when the caller did not insist on this one */
  if ((r = uv_tcp_bind(&M.server, (const struct sockaddr *)&addr, 0)) < 0 ||
      (r = uv_listen((uv_stream_t *)&M.server, 128, on_connection)) < 0) {
    fprintf(stderr, "master: cannot listen on 127.0.0.1:%ld: %s\n", port, uv_strerror(r));
    return 1;
  }
  printf("listening on 127.0.0.1:%ld: %ld items of %ld elements\n", port, M.nitems, CHUNK);
  fflush(stdout);
  uv_run(M.loop, UV_RUN_DEFAULT); /* returns once finish() has closed every handle */
  uv_loop_close(M.loop);
  free(M.state);
  lc_free(M.secret);
  return M.finished ? 0 : 1;
}

/* ==== the launcher: the cluster type and main ================================================ */

typedef struct app {
  /* the two strategy structs: what a cluster type is */
  lc_master_launcher master;
  lc_worker_launcher worker;
  char self[4096]; /* this program, here: the master runs it */
  /* what the master's output told us (written on the engine thread, read here) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int joined;
  int have_result;
  long long result;
  char **sent; /* "HOST:PATH" of each copy prepare_host sent */
  size_t nsent;
} app;

static char *strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A string the library may free: lc_free is free(), so malloc is the allocator to use. */
static char *strdup_printf(const char *fmt, ...) {
  va_list ap;
  char *s = NULL;
  va_start(ap, fmt);
  if (vasprintf(&s, fmt, ap) < 0)
    s = NULL;
  va_end(ap);
  return s;
}

/* lc_master_launcher.command: the master runs on this machine, straight from where we are. */
static int master_command(lc_master_launcher *self, lc_cluster *cluster, int port, char **out) {
  app *a = self->data;
  char *q = NULL;
  (void)cluster;
  if (lc_shell_quote(&q, a->self) < 0)
    return -ENOMEM;
  *out = strdup_printf("exec %s master %d", q, port);
  lc_free(q);
  return *out != NULL ? 0 : -ENOMEM;
}

/* lc_worker_launcher.command: a worker runs the copy main() sent to its host's working directory.
 * Methods may use the whole public API: here the group and the runtime's working directory. */
static int worker_command(lc_worker_launcher *self, lc_cluster *cluster, const lc_worker_info *w,
                          char **out) {
  lc_runtime *rt = lc_group_find(lc_cluster_group(cluster), w->host);
  const char *wd = NULL;
  char *path, *q = NULL;
  int r;
  (void)self;
  if (rt == NULL)
    return -ENOENT;
  if ((r = lc_runtime_workdir(&wd, rt)) < 0)
    return r;
  if ((path = strdup_printf("%s/%s", wd, BINARY)) == NULL || lc_shell_quote(&q, path) < 0) {
    free(path);
    return -ENOMEM;
  }
  /* the worker's own directory (with cluster.json) is the current one; its context is in the
   * environment: LAZYCLUSTER_MASTER_ADDR/_PORT, _WORKER_INDEX/_COUNT, _HOST, CUDA_VISIBLE_DEVICES,
   * LAZYCLUSTER_SECRET_FILE (the secret it proves to the master)
   */
  *out = strdup_printf("exec %s worker", q);
  free(path);
  lc_free(q);
  return *out != NULL ? 0 : -ENOMEM;
}

/* LC_EREMOTE naming the first process of the cluster that ended, or 0 (a launcher method may
 * look at the processes; lc_cluster_wait, which reports ends, is the caller's). */
static int some_process_ended(lc_cluster *cluster) {
  lc_process *p = lc_cluster_master_process(cluster);
  if (p != NULL && lc_process_wait(NULL, p, 0) != -ETIMEDOUT)
    return lc_error_set(LC_EREMOTE, "the master ended");
  for (size_t i = 0; i < lc_cluster_worker_count(cluster); i++)
    if ((p = lc_cluster_worker_process(cluster, i)) != NULL &&
        lc_process_wait(NULL, p, 0) != -ETIMEDOUT)
      return lc_error_set(LC_EREMOTE, "%s worker-%zu ended", lc_cluster_worker(cluster, i)->host,
                          i);
  return 0;
}

/* lc_worker_launcher.wait_ready: our workers listen on nothing (the launcher is `portless`), so
 * they are ready once the master has said "joined:" for each of the n that run; a process that
 * ends meanwhile is a failure at once, not after the timeout. */
static int worker_wait_ready(lc_worker_launcher *self, lc_cluster *cluster, int n, int timeout_ms) {
  app *a = self->data;
  int want = n, r = 0; /* every running worker; ours never leave before the end */
  uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
  pthread_mutex_lock(&a->mu);
  while (a->joined < want && r == 0) {
    struct timespec ts;
    if (now_ms() >= deadline) {
      r = -ETIMEDOUT;
      break;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&a->cv, &a->mu, &ts);
    pthread_mutex_unlock(&a->mu);
    r = some_process_ended(cluster);
    pthread_mutex_lock(&a->mu);
  }
  if (r == -ETIMEDOUT)
    fprintf(stderr, "custom_cluster: %d of %d workers joined the master in %d ms\n", a->joined,
            want, timeout_ms);
  pthread_mutex_unlock(&a->mu);
  return r;
}

/* Every line of every process of the cluster (engine thread: quick, no blocking calls). */
static void on_line(const char *tag, const char *line, size_t len, lc_stream stream,
                    void *payload) {
  app *a = payload;
  size_t tl = strlen(tag);
  long long v;
  fprintf(stream == LC_STDERR ? stderr : stdout, "[%s] %.*s\n", tag, (int)len, line);
  if (stream != LC_STDOUT || tl < 7 || strcmp(tag + tl - 7, " master") != 0)
    return;
  pthread_mutex_lock(&a->mu);
  if (strncmp(line, "joined: ", 8) == 0)
    a->joined++;
  else if (sscanf(line, "result: %lld", &v) == 1) {
    a->result = v;
    a->have_result = 1;
  }
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
}

/* lc_worker_launcher.prepare_host: this program goes to each host's working directory, where
 * worker_command finds it. The cluster runs the steps of every host at once (the group's
 * fan-out), once per host, before the first worker starts there, and while the master starts. */
static int worker_prepare_host(lc_worker_launcher *self, lc_cluster *cluster, const char *host,
                               const char *workdir, lc_task *task) {
  app *a = self->data;
  char *path = NULL, **v;
  int r;
  (void)cluster;
  if ((path = strdup_printf("%s:%s/%s", host, workdir, BINARY)) == NULL ||
      (v = realloc(a->sent, (a->nsent + 1) * sizeof(*v))) == NULL) {
    free(path);
    return -ENOMEM;
  }
  a->sent = v;
  a->sent[a->nsent++] = path; /* "HOST:PATH", printed once the cluster runs */
  r = lc_task_add_send(task, a->self, path + strlen(host) + 1);
  return r;
}
static int usage(FILE *f, int status) {
  fprintf(f, "usage: custom_cluster [-F SSH_CONFIG] [-n WORKERS] [HOST...]\n"
             "Starts a job server here and WORKERS workers (default: 2 per host, 4 here) on the\n"
             "hosts (this machine when none is given), computes a dot product of 2^24 elements\n"
             "on them (on their GPUs when the CUDA runtime finds one) and checks the result.\n"
             "       custom_cluster master PORT   (run by the cluster)\n"
             "       custom_cluster worker        (run by the cluster)\n");
  return status;
}

static int run_launcher(int argc, char **argv) {
  app a;
  lc_engine *engine = NULL;
  lc_group *g = NULL;
  lc_discovery *disc = NULL;
  lc_cluster *c = NULL;
  lc_runtime_options ro;
  lc_cluster_options co;
  const char *ssh_config = NULL, *env[3] = {NULL, NULL, NULL};
  char *hosts = NULL, *pass[2] = {NULL, NULL};
  size_t nenv = 0;
  pthread_condattr_t ca;
  int nworkers = 0, status = 1, r;
  size_t hostlen = 0;
  int64_t exact = exact_dot(TOTAL);
  ssize_t n;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      free(hosts);
      return usage(stdout, 0);
    } else if (strcmp(argv[i], "-F") == 0 && i + 1 < argc) {
      ssh_config = argv[++i];
    } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
      nworkers = atoi(argv[++i]);
      if (nworkers < 1) {
        free(hosts);
        return usage(stderr, 2);
      }
    } else if (argv[i][0] == '-') {
      free(hosts);
      return usage(stderr, 2);
    } else { /* hosts become "lab0,lab1,...": what lc_discover takes */
      size_t k = strlen(argv[i]);
      char *v = realloc(hosts, hostlen + k + 2);
      if (v == NULL) {
        free(hosts);
        return 1;
      }
      hosts = v;
      if (hostlen > 0)
        hosts[hostlen++] = ',';
      memcpy(hosts + hostlen, argv[i], k + 1);
      hostlen += k;
    }
  }

  memset(&a, 0, sizeof(a));
  pthread_mutex_init(&a.mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&a.cv, &ca);
  pthread_condattr_destroy(&ca);
  if ((n = readlink("/proc/self/exe", a.self, sizeof(a.self) - 1)) <= 0) {
    fprintf(stderr, "custom_cluster: where am I? /proc/self/exe: %s\n", strerror(errno));
    goto out;
  }
  a.self[n] = '\0';

  /* The cluster type: two strategy structs. */
  a.master.version = LC_MASTER_LAUNCHER_VERSION;
  a.master.data = &a;
  a.master.command = master_command;
  a.master.wait_ready = NULL; /* the default: ready when its port accepts, while it lives */
  a.worker.version = LC_WORKER_LAUNCHER_VERSION;
  a.worker.data = &a;
  a.worker.command = worker_command;
  a.worker.wait_ready = worker_wait_ready;
  a.worker.prepare_host = worker_prepare_host; /* this binary goes to every host */
  a.worker.portless = 1; /* workers connect to the master; they listen on nothing */
  a.worker.mesh = 0;     /* and need not reach each other */

  if ((r = lc_engine_new(&engine, NULL)) < 0) {
    fprintf(stderr, "custom_cluster: %s\n", lc_error_last());
    goto out;
  }
  lc_runtime_options_init(&ro);
  ro.ssh_config = ssh_config;
  if (hosts != NULL) {
    /* the hosts, connected at once, with their facts: GPUs found there steer the placement */
    lc_discover_options d;
    lc_discover_options_init(&d);
    d.hosts = hosts;
    d.runtime = &ro;
    d.facts = 1;
    if ((r = lc_discover(&g, &disc, engine, &d)) < 0) {
      fprintf(stderr, "custom_cluster: %s\n", lc_error_last());
      goto out;
    }
    for (size_t i = 0; i < lc_discovery_count(disc); i++) {
      const lc_hostinfo *hi = lc_discovery_info(disc, i);
      if (lc_discovery_state(disc, i) != LC_HOST_READY)
        fprintf(stderr, "custom_cluster: %s left out: %s\n", lc_discovery_host(disc, i),
                lc_discovery_reason(disc, i));
      else
        printf("host %s: %.0f cores, %zu GPUs%s%s\n", lc_discovery_host(disc, i),
               hi ? lc_hostinfo_cores(hi) : 0.0, hi ? lc_hostinfo_gpu_count(hi) : 0,
               hi && lc_hostinfo_gpu_count(hi) == 0 ? ": " : "",
               hi && lc_hostinfo_gpu_count(hi) == 0 ? lc_hostinfo_gpu_reason(hi) : "");
    }
    if (lc_group_count(g) == 0) {
      fprintf(stderr, "custom_cluster: no host is reachable\n");
      goto out;
    }
  } else {
    /* no hosts: this machine is the one runtime (no sshd needed) */
    lc_runtime *local = NULL;
    lc_hostinfo *hi = NULL;
    if ((r = lc_group_new(&g, engine, NULL)) < 0 ||
        (r = lc_runtime_new_local(&local, engine, &ro)) < 0) {
      fprintf(stderr, "custom_cluster: %s\n", lc_error_last());
      goto out;
    }
    if (lc_hostinfo_local(&hi) == 0) { /* its GPUs steer the placement, as discovery would */
      lc_runtime_set_resources(local, (int)lc_hostinfo_gpu_count(hi), 0);
      printf("this machine: %.0f cores, %zu GPUs%s%s\n", lc_hostinfo_cores(hi),
             lc_hostinfo_gpu_count(hi), lc_hostinfo_gpu_count(hi) == 0 ? ": " : "",
             lc_hostinfo_gpu_count(hi) == 0 ? lc_hostinfo_gpu_reason(hi) : "");
      lc_hostinfo_free(hi);
    }
    if ((r = lc_group_add(g, local)) < 0) {
      lc_runtime_free(local);
      fprintf(stderr, "custom_cluster: %s\n", lc_error_last());
      goto out;
    }
  }
  if (nworkers == 0)
    nworkers = hosts != NULL ? 2 * (int)lc_group_count(g) : 4;

  /* The cluster: our two launchers over the group. Every line its processes write comes to
   * on_line; LC_CUDART_PATH and LC_CUBLAS_PATH, when set here, go to every process. */
  lc_cluster_options_init(&co);
  co.on_line = on_line;
  co.payload = &a;
  for (int i = 0; i < 2; i++) {
    const char *name = i == 0 ? "LC_CUDART_PATH" : "LC_CUBLAS_PATH";
    if (getenv(name) != NULL && (pass[i] = strdup_printf("%s=%s", name, getenv(name))) != NULL)
      env[nenv++] = pass[i];
  }
  co.env = env;
  if ((r = lc_cluster_new(&c, g, &a.master, &a.worker, &co)) < 0 ||
      (r = lc_cluster_start(c, nworkers)) < 0) {
    fprintf(stderr, "custom_cluster: the cluster did not start: %s\n", lc_error_last());
    goto out;
  }
  for (size_t i = 0; i < a.nsent; i++)
    printf("sent %s to %s\n", BINARY, a.sent[i]);
  printf("master on %s, localhost:%d; %zu workers:", lc_cluster_master_host(c),
         lc_cluster_master_port(c), lc_cluster_worker_count(c));
  for (size_t i = 0; i < lc_cluster_worker_count(c); i++) {
    const lc_worker_info *w = lc_cluster_worker(c, i);
    printf(" worker-%d@%s%s", w->index, w->host, w->gpu >= 0 ? "(GPU)" : "");
  }
  printf("\n");

  /* Wait for the master to finish: the first process to end, in a good run (see the top). */
  r = lc_cluster_wait(c, -1);
  printf("first process to end: %s\n", r == LC_EREMOTE ? lc_error_last() : lc_strerror(r));
  pthread_mutex_lock(&a.mu);
  {
    /* its last lines may trail its exit by a moment: give them a few seconds */
    uint64_t deadline = now_ms() + 5000;
    while (!a.have_result && now_ms() < deadline) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      ts.tv_sec += 1;
      pthread_cond_timedwait(&a.cv, &a.mu, &ts);
    }
  }
  if (!a.have_result)
    fprintf(stderr, "custom_cluster: the master gave no result\n");
  else if (a.result != (long long)exact)
    fprintf(stderr, "custom_cluster: WRONG: the cluster says %lld, the exact value is %lld\n",
            a.result, (long long)exact);
  else {
    printf("result %lld matches the exact value %lld (%zu workers)\n", a.result, (long long)exact,
           lc_cluster_worker_count(c));
    status = 0;
  }
  pthread_mutex_unlock(&a.mu);

out:
  /* the order matters: the cluster (workers, master, tunnels), then the group and its runtimes
   * (their working directories go, with our binary), then the engine */
  lc_cluster_free(c);
  lc_discovery_free(disc);
  lc_group_free(g);
  lc_engine_free(engine);
  pthread_cond_destroy(&a.cv);
  pthread_mutex_destroy(&a.mu);
  free(pass[0]);
  free(pass[1]);
  for (size_t i = 0; i < a.nsent; i++)
    free(a.sent[i]);
  free(a.sent);
  free(hosts);
  return status;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines, also into a pipe */
  if (argc >= 2 && strcmp(argv[1], "worker") == 0)
    return run_worker();
  if (argc >= 2 && strcmp(argv[1], "master") == 0)
    return argc == 3 ? run_master(argv[2]) : usage(stderr, 2);
  return run_launcher(argc, argv);
}
