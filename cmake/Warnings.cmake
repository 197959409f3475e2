# Project-wide compile flags: warnings are errors, and the optional sanitizer build.
add_compile_options(-Wall -Wextra -Werror)
# Only the C API of MPI is used; the deprecated C++ bindings would need libmpi_cxx.
add_compile_definitions(OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)

if(TRAINPROOF_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# Source paths in messages (mpiCheck's __FILE__) are relative to the project, not the build host.
add_compile_options(-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=)
