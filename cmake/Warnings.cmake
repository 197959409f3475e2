# Project-wide compile flags: warnings are errors, and the optional sanitizer build. Host-compiler
# flags are limited to C and C++ so nvcc, which takes its own, never sees them directly.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)  # static libraries are linked into the GPU backend .so
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-Wall;-Wextra;-Werror>")
# Only the C API of MPI is used; the deprecated C++ bindings would need libmpi_cxx.
add_compile_definitions(OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
# Source paths in messages (mpiCheck's __FILE__) are relative to the project, not the build host.
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>")

# ThreadSanitizer cannot share a process with ASan, so it is a build of its own.
option(TRAINPROOF_TSAN "Build with ThreadSanitizer (not together with TRAINPROOF_SANITIZE)" OFF)
if(TRAINPROOF_SANITIZE AND TRAINPROOF_TSAN)
  message(FATAL_ERROR "TRAINPROOF_SANITIZE (ASan/UBSan) and TRAINPROOF_TSAN exclude each other; use two build folders")
endif()

if(TRAINPROOF_SANITIZE)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
endif()

if(TRAINPROOF_TSAN)
  # -g1: a race report is only useful with file and line for both accesses, and line tables give
  # them at a fraction of full debug information's compile time.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=thread;-fno-omit-frame-pointer;-g1>")
  add_link_options(-fsanitize=thread)
endif()
