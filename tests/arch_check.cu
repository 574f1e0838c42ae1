// Compiled for sm_80 and sm_100 in every build (see tests/CMakeLists.txt): every public header, and a kernel
// of each family instantiated, so nothing in the library is sm_90-only by accident.
#include "hawk/hawk.cuh"
