# Build conventions shared by every folder: one place that decides warnings, sanitizers and
# how a test is registered, so folder CMakeLists.txt files stay a few lines long.

# Project code gets strict warnings; third-party headers come in as SYSTEM and stay quiet.
add_library(specd_project_options INTERFACE)
target_compile_features(specd_project_options INTERFACE cxx_std_20)
target_compile_options(specd_project_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>)
# libstdc++ first among a binary's libraries, so the C++ library's own symbols win: PyPI's
# libtorch.so exports copies of some (std::filesystem's), which crash when our code binds to them.
target_link_options(specd_project_options INTERFACE
  "LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")
if(SPECD_SANITIZE)
  target_compile_options(specd_project_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all>
    # GCC 12 reports false maybe-uninitialized warnings inside libstdc++ (std::regex) once the
    # sanitizers' instrumentation changes inlining; the Release build keeps the warning.
    $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
  target_link_options(specd_project_options INTERFACE -fsanitize=address,undefined)
endif()

# specd_library(NAME SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
# A layer library; headers are included as "common/io/safetensors.h" from the repo root.
function(specd_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE specd_project_options ${ARG_PRIVATE_DEPS})
endfunction()

# specd_test(NAME SOURCES ... [DEPS ...] [LABELS ...])
# A GoogleTest binary; every TEST in it becomes a ctest entry carrying the labels
# (unit, integration, gpu, bench) that .ci/run and developers select with `ctest -L`.
function(specd_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE specd_project_options ${ARG_DEPS} GTest::gtest_main GTest::gmock)
  gtest_discover_tests(${name}
    PROPERTIES LABELS "${ARG_LABELS}"
               SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
               ENVIRONMENT "SPECD_SOURCE_DIR=${PROJECT_SOURCE_DIR};SPECD_SHARED_DIR=${SPECD_SHARED_DIR};SPECD_CACHE_DIR=${SPECD_CACHE_DIR}"
    DISCOVERY_TIMEOUT 60)
endfunction()
