# The three ways a user meets hawk, each built from scratch (run by CTest as `package:consumers`):
#   1. find_package(hawk CONFIG REQUIRED) against a fresh install of this build tree;
#   2. add_subdirectory() of the source tree (tests, examples and benchmarks off, as for a non-top-level project);
#   3. plain `nvcc -I <prefix>/include`.
file(REMOVE_RECURSE ${HAWK_WORK_DIR})
set(prefix ${HAWK_WORK_DIR}/prefix)

function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "step failed (${result}): ${ARGN}\n${output}")
  endif()
endfunction()

run_step(${CMAKE_COMMAND} --install ${HAWK_BUILD_DIR} --prefix ${prefix})
foreach(file include/hawk/hawk.cuh lib/cmake/hawk/hawkConfig.cmake lib/cmake/hawk/hawkConfigVersion.cmake)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "install did not place ${file}")
  endif()
endforeach()

run_step(${CMAKE_COMMAND} -S ${HAWK_CONSUMER_SOURCE} -B ${HAWK_WORK_DIR}/find_package -G ${HAWK_GENERATOR}
         -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CUDA_COMPILER=${HAWK_CUDA_COMPILER})
run_step(${CMAKE_COMMAND} --build ${HAWK_WORK_DIR}/find_package)

run_step(${CMAKE_COMMAND} -S ${HAWK_CONSUMER_SOURCE} -B ${HAWK_WORK_DIR}/add_subdirectory -G ${HAWK_GENERATOR}
         -DHAWK_SOURCE_DIR=${HAWK_SOURCE_DIR} -DCMAKE_CUDA_COMPILER=${HAWK_CUDA_COMPILER})
run_step(${CMAKE_COMMAND} --build ${HAWK_WORK_DIR}/add_subdirectory)

run_step(${HAWK_CUDA_COMPILER} -std=c++17 -arch=sm_90 -I${prefix}/include ${HAWK_CONSUMER_SOURCE}/consumer.cu
         ${HAWK_CONSUMER_SOURCE}/second_unit.cu -o ${HAWK_WORK_DIR}/plain_include_consumer)
message(STATUS "consumers built: find_package, add_subdirectory, plain -I")
