#include "compiler/artifact/blas_runtime.h"

#include <dlfcn.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "compiler/artifact/conv_runtime.h"

namespace hlocache::compiler {
namespace {

// CBLAS's constants (cblas.h): its enums are ints.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using CblasSgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c,
                            int ldc);
using SetThreads = void (*)(int threads);

struct Library {
  CblasSgemm sgemm = nullptr;
  SetThreads set_threads = nullptr;  // OpenBLAS's; absent from other libraries.
  std::atomic<int> threads{0};       // The count last set.
  std::string error;
};

Library& Loaded() {
  static Library* library = [] {
    auto* l = new Library;  // Kept for the process: executables hold its functions.
    std::vector<std::string> names = {"libopenblas.so.0", "libblas.so.3"};
    if (const char* chosen = std::getenv("HLOCACHE_BLAS_LIBRARY"); chosen != nullptr && *chosen) {
      names = {chosen};
    }
    std::string tried;
    for (const std::string& name : names) {
      void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        tried += (tried.empty() ? "" : ", ") + name + " (not found)";
        continue;
      }
      auto sgemm = reinterpret_cast<CblasSgemm>(::dlsym(handle, "cblas_sgemm"));
      if (sgemm == nullptr) {
        tried += (tried.empty() ? "" : ", ") + name + " (no cblas_sgemm)";
        ::dlclose(handle);
        continue;
      }
      l->sgemm = sgemm;
      l->set_threads = reinterpret_cast<SetThreads>(::dlsym(handle, "openblas_set_num_threads"));
      return l;
    }
    l->error =
        "no BLAS library with cblas_sgemm on this host (tried " + tried + "): install libopenblas0";
    return l;
  }();
  return *library;
}

int Sgemm(int threads, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  for (const int64_t v : {m, n, k, lda, ldb, ldc}) {
    if (v > INT_MAX) return 1;
  }
  Library& l = Loaded();
  if (l.set_threads != nullptr && threads > 0 && l.threads.exchange(threads) != threads) {
    l.set_threads(threads);
  }
  l.sgemm(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans, static_cast<int>(m),
          static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b,
          static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
  return 0;
}

const hlocache_blas kBlas = {&Sgemm, &DnnlConvolve};

}  // namespace

Result<const hlocache_blas*> BlasRuntime() {
  const Library& l = Loaded();
  if (l.sgemm == nullptr) return Error(FailedPrecondition(l.error));
  return &kBlas;
}

}  // namespace hlocache::compiler
