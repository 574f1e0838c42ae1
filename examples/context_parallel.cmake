# RG-LRU context parallelism example (included by examples/CMakeLists.txt; add `context_parallel` to its family
# list). NCCL is optional: found in the CUDA toolkit, $NCCL_HOME, or a pip wheel (site-packages/nvidia/nccl).
# Without NCCL the example still builds: its one-GPU emulation (ranks as threads, streams + events instead of
# NCCL) runs, and the NCCL mode reports itself skipped (77).
set(_hawk_nccl_hints ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME})
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
    OUTPUT_VARIABLE _hawk_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_hawk_nccl_wheel)
    list(APPEND _hawk_nccl_hints ${_hawk_nccl_wheel})
  endif()
endif()
find_path(HAWK_NCCL_INCLUDE_DIR nccl.h HINTS ${_hawk_nccl_hints} PATH_SUFFIXES include)
find_library(HAWK_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_hawk_nccl_hints} PATH_SUFFIXES lib lib64)

find_package(Threads REQUIRED)
add_executable(context_parallel context_parallel.cu)
hawk_target_defaults(context_parallel)
target_link_libraries(context_parallel PRIVATE Threads::Threads)
if(HAWK_NCCL_INCLUDE_DIR AND HAWK_NCCL_LIBRARY)
  message(STATUS "hawk: NCCL found (${HAWK_NCCL_LIBRARY}): context_parallel runs one rank per GPU over NCCL")
  target_compile_definitions(context_parallel PRIVATE HAWK_CP_WITH_NCCL)
  target_include_directories(context_parallel SYSTEM PRIVATE ${HAWK_NCCL_INCLUDE_DIR})
  target_link_libraries(context_parallel PRIVATE ${HAWK_NCCL_LIBRARY})
else()
  message(STATUS "hawk: NCCL not found: context_parallel builds with its one-GPU emulation only")
endif()

# One rank per GPU over NCCL: skipped (77) with fewer than 2 GPUs or without NCCL.
add_test(NAME example:context_parallel COMMAND context_parallel)
# Four ranks as threads on one GPU: runs on any GPU machine.
add_test(NAME example:context_parallel_emulated COMMAND context_parallel --emulate 4)
set_tests_properties(example:context_parallel example:context_parallel_emulated PROPERTIES
  SKIP_RETURN_CODE 77 LABELS example ENVIRONMENT NCCL_NVLS_ENABLE=0)
