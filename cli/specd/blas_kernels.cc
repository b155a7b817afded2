#include "cli/specd/blas_kernels.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace specd::cli {
namespace {

// OpenBLAS's name for the widest kernels this CPU runs; nullptr where it has nothing past SSE3.
const char* WidestCoreType() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

}  // namespace

void RunAgainOnWideBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice, or our own
  // Looked up rather than linked: the CUDA flavour's LibTorch brings MKL instead.
  using CoreName = char* (*)();
  const auto core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (core_name == nullptr || std::strcmp(core_name(), "Prescott") != 0) return;
  const char* wide = WidestCoreType();
  if (wide == nullptr) return;
  setenv("OPENBLAS_CORETYPE", wide, 1);
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // the exec failed: go on as loaded
}

}  // namespace specd::cli
