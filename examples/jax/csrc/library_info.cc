//! \file
//! What the Python package asks the library before using it: the hawk version it was built from (the package
//! refuses a library of another version: the handlers' argument lists may differ).

#include <cstdint>

#ifndef HAWK_JAX_VERSION
#error "HAWK_JAX_VERSION must be defined by the build (examples/jax/CMakeLists.txt)"
#endif

extern "C" const char* hawk_jax_version() { return HAWK_JAX_VERSION; }
