/* A stand-in for the CUDA driver (libcuda.so.1) for tests on machines without a GPU: it answers
 * the driver-API calls hlocache makes as FAKE_CUDA says, so that the runtime's handling of each
 * answer is checked through the real dlopen path.
 *   FAKE_CUDA=nodevice   cuInit fails with CUDA_ERROR_NO_DEVICE (100)
 *   FAKE_CUDA=sm_86      one device, compute capability 8.6
 *   FAKE_CUDA=sm_90      one device, compute capability 9.0; cuModuleLoadData then fails with
 *                        CUDA_ERROR_INVALID_IMAGE (200), as a driver too old for the cubin does
 * Every cuMemAlloc is matched by a cuMemFree; FAKE_CUDA_LOG names a file that gets one line
 * per call, to check that.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* mode(void) {
  const char* m = getenv("FAKE_CUDA");
  return m ? m : "nodevice";
}
static void log_call(const char* what) {
  const char* path = getenv("FAKE_CUDA_LOG");
  if (!path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "%s\n", what);
  fclose(f);
}
int cuInit(unsigned flags) {
  (void)flags;
  log_call("cuInit");
  return strcmp(mode(), "nodevice") == 0 ? 100 : 0;
}
int cuGetErrorString(int e, const char** s) {
  *s = e == 200 ? "device kernel image is invalid" : e == 100 ? "no CUDA-capable device is detected"
                                                            : "unknown error";
  return 0;
}
int cuDeviceGetCount(int* n) { *n = 1; return 0; }
int cuDeviceGet(int* d, int i) { *d = i; return 0; }
int cuDeviceGetAttribute(int* v, int attribute, int d) {
  (void)d;
  const int sm = strcmp(mode(), "sm_86") == 0 ? 86 : 90;
  *v = attribute == 75 ? sm / 10 : attribute == 76 ? sm % 10 : 0;
  return 0;
}
int cuDeviceGetName(char* name, int n, int d) {
  (void)d;
  snprintf(name, (size_t)n, "Fake GPU");
  return 0;
}
int cuDevicePrimaryCtxRetain(void** c, int d) { (void)d; *c = (void*)1; log_call("retain"); return 0; }
int cuDevicePrimaryCtxRelease_v2(int d) { (void)d; log_call("release"); return 0; }
int cuCtxSetCurrent(void* c) { (void)c; return 0; }
int cuCtxSynchronize(void) { return 0; }
int cuModuleLoadData(void** m, const void* image) { (void)m; (void)image; log_call("load"); return 200; }
int cuModuleUnload(void* m) { (void)m; return 0; }
int cuModuleGetFunction(void** f, void* m, const char* name) { (void)f; (void)m; (void)name; return 500; }
int cuMemAlloc_v2(unsigned long long* p, size_t n) { *p = (unsigned long long)malloc(n); log_call("alloc"); return 0; }
int cuMemFree_v2(unsigned long long p) { free((void*)p); log_call("free"); return 0; }
int cuMemcpyHtoD_v2(unsigned long long d, const void* s, size_t n) { memcpy((void*)d, s, n); return 0; }
int cuMemcpyDtoH_v2(void* d, unsigned long long s, size_t n) { memcpy(d, (void*)s, n); return 0; }
int cuMemcpyDtoD_v2(unsigned long long d, unsigned long long s, size_t n) { memcpy((void*)d, (void*)s, n); return 0; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)stream;
  (void)params; (void)extra;
  return 500;
}
