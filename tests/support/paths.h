#pragma once
// Where tests find data outside the build tree. ctest sets these variables (see cmake/specd.cmake);
// a test binary run by hand falls back to the layout of a checkout with ../shared beside it.
#include <cstdlib>
#include <filesystem>
#include <string>

namespace specd::testing {

inline std::filesystem::path PathFromEnv(const char* name, const std::filesystem::path& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::filesystem::path(value) : fallback;
}

// The repository root.
inline std::filesystem::path SourceDir() { return PathFromEnv("SPECD_SOURCE_DIR", "."); }

// ../shared beside the checkout: fixtures/ and reference/.
inline std::filesystem::path SharedDir() {
  return PathFromEnv("SPECD_SHARED_DIR", SourceDir() / ".." / "shared");
}

// One reference checkpoint of ../shared/fixtures (e.g. "qwen35-tiny-a").
inline std::filesystem::path FixtureDir(const std::string& name) {
  return SharedDir() / "fixtures" / name;
}

// .cache/ in the checkout, filled by scripts/setup.sh (e.g. tokenizer/qwen3/tokenizer.json).
inline std::filesystem::path CacheDir() {
  return PathFromEnv("SPECD_CACHE_DIR", SourceDir() / ".cache");
}

}  // namespace specd::testing
