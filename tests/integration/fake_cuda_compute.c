/*
 * fake_cuda_compute.c - a stand-in CUDA runtime and cuBLAS for test_custom_cluster.sh, so that
 * the example's GPU path runs in CI on machines without a GPU (loaded through LC_CUDART_PATH and
 * LC_CUBLAS_PATH). "Device" memory is host memory that this file keeps track of; every call
 * checks its arguments the way the real ones require (copies in the direction their kind says,
 * between device and host pointers of the right size; sdot on device vectors into a host
 * result) and fails with cudaErrorInvalidValue / CUBLAS_STATUS_INVALID_VALUE otherwise.
 *
 * One device. cudaRuntimeGetVersion says 12.4. LC_FAKE_CUDA_FAIL_AFTER=N makes every cudaMemcpy
 * after the first N fail (the example must then fall back to the CPU and still be exact).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int cudaGetDeviceCount(int *count);
EXPORT int cudaSetDevice(int device);
EXPORT int cudaRuntimeGetVersion(int *version);
EXPORT int cudaMalloc(void **ptr, size_t size);
EXPORT int cudaMemcpy(void *dst, const void *src, size_t count, int kind);
EXPORT int cudaFree(void *ptr);
EXPORT const char *cudaGetErrorString(int error);
EXPORT int cublasCreate_v2(void **handle);
EXPORT int cublasDestroy_v2(void *handle);
EXPORT int cublasSdot_v2(void *handle, int n, const float *x, int incx, const float *y, int incy,
                         float *result);

enum { INVALID_VALUE = 1, MEMORY_ALLOCATION = 2 };

static struct {
  void *p;
  size_t size;
} dev[64];
static long copies;
static int handle_token;

/* The size of the device allocation p points into from its start, or 0 for host memory. */
static size_t device_size(const void *p) {
  for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
    if (dev[i].p != NULL && dev[i].p == p)
      return dev[i].size;
  return 0;
}

int cudaGetDeviceCount(int *count) {
  *count = 1;
  return 0;
}

int cudaSetDevice(int device) { return device == 0 ? 0 : INVALID_VALUE; }

int cudaRuntimeGetVersion(int *version) {
  *version = 12040;
  return 0;
}

int cudaMalloc(void **ptr, size_t size) {
  for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
    if (dev[i].p == NULL) {
      if ((dev[i].p = malloc(size)) == NULL)
        return MEMORY_ALLOCATION;
      dev[i].size = size;
      *ptr = dev[i].p;
      return 0;
    }
  return MEMORY_ALLOCATION;
}

int cudaFree(void *ptr) {
  for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
    if (dev[i].p != NULL && dev[i].p == ptr) {
      free(dev[i].p);
      dev[i].p = NULL;
      return 0;
    }
  return INVALID_VALUE;
}

int cudaMemcpy(void *dst, const void *src, size_t count, int kind) {
  const char *limit = getenv("LC_FAKE_CUDA_FAIL_AFTER");
  size_t d = device_size(dst), s = device_size(src);
  if (limit != NULL && copies >= atol(limit))
    return INVALID_VALUE;
  copies++;
  if (kind == 1 && (d < count || s != 0)) /* cudaMemcpyHostToDevice */
    return INVALID_VALUE;
  if (kind == 2 && (s < count || d != 0)) /* cudaMemcpyDeviceToHost */
    return INVALID_VALUE;
  if (kind != 1 && kind != 2)
    return INVALID_VALUE;
  memcpy(dst, src, count);
  return 0;
}

const char *cudaGetErrorString(int error) {
  switch (error) {
  case 0:
    return "no error";
  case INVALID_VALUE:
    return "invalid argument";
  case MEMORY_ALLOCATION:
    return "out of memory";
  default:
    return "unrecognized error code";
  }
}

int cublasCreate_v2(void **handle) {
  *handle = &handle_token;
  return 0;
}

int cublasDestroy_v2(void *handle) { return handle == &handle_token ? 0 : INVALID_VALUE; }

int cublasSdot_v2(void *handle, int n, const float *x, int incx, const float *y, int incy,
                  float *result) {
  float s = 0; /* single precision, as on the device */
  if (handle != &handle_token || n < 0 || incx != 1 || incy != 1 ||
      device_size(x) < (size_t)n * sizeof(float) || device_size(y) < (size_t)n * sizeof(float) ||
      device_size(result) != 0)
    return 7; /* CUBLAS_STATUS_INVALID_VALUE */
  for (int i = 0; i < n; i++)
    s += x[i] * y[i];
  *result = s;
  return 0;
}
