# Sanitizer and fuzzing builds of wte, each in a build directory of its own.
#   -DWTE_SANITIZE=ON  (g++): every target built with -fsanitize=address,undefined; the whole test
#                      suite runs in it (scripts/quickstart.sh test, build directory build-asan,
#                      configured there with -O1 to keep CI's build short).
#   -DWTE_FUZZ=ON      (clang 14, -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14):
#                      libFuzzer targets in fuzz/ with ASan+UBSan (scripts/fuzz.sh, build-fuzz).
#                      Highway's kernels are compiled for the static target only
#                      (HWY_COMPILE_ONLY_STATIC), a shorter build: the targets fuzz parsers and
#                      loaders, and the kernels on every SIMD target run under ASan+UBSan in the
#                      WTE_SANITIZE build's tests.
# OpenMP under clang: clang's -fopenmp would load LLVM's libomp beside oneDNN's GNU libgomp (two
# OpenMP runtimes in one process). The fuzz build therefore compiles without
# -fopenmp (wte's own `#pragma omp` loops run on one thread, which is all a parser fuzzer needs)
# and links GNU libgomp explicitly for oneDNN and the omp_* calls: one runtime, libgomp.
# Top-level builds only: as a subproject wte writes nothing into the parent's cache.
if(PROJECT_IS_TOP_LEVEL)
  option(WTE_SANITIZE "build everything with -fsanitize=address,undefined" OFF)
  option(WTE_FUZZ "build the libFuzzer targets in fuzz/ (clang only; implies ASan+UBSan)" OFF)
endif()

set(WTE_SANITIZER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer
                        -fno-sanitize-recover=undefined)
if(WTE_SANITIZE OR WTE_FUZZ)
  add_compile_options(${WTE_SANITIZER_FLAGS})
  add_link_options(-fsanitize=address,undefined)
endif()
if(WTE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "WTE_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link -Wno-unknown-pragmas -gline-tables-only)
  add_compile_definitions(HWY_COMPILE_ONLY_STATIC=1)
  execute_process(COMMAND g++ -print-file-name=libgomp.so OUTPUT_VARIABLE WTE_LIBGOMP
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  add_library(OpenMP::OpenMP_CXX INTERFACE IMPORTED)
  # clang's omp.h declares the plain omp_* API calls wte makes (omp_get_max_threads, ...), which
  # libgomp provides with the same signatures.
  set_target_properties(OpenMP::OpenMP_CXX PROPERTIES INTERFACE_LINK_LIBRARIES "${WTE_LIBGOMP}")
  set(BUILD_TESTING OFF CACHE BOOL "" FORCE)
endif()
