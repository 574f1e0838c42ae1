# Warning and code-generation flags for hawk's own tests, examples and benchmarks (not imposed on users).
#
# No --use_fast_math: the kernels rely on the CUDA math library's deterministic expf/log1pf/sqrtf and IEEE
# division, and on the same bits in every code path (include/hawk/core/math.hpp).
function(hawk_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall -Xcompiler=-Wextra
                               -Werror=all-warnings -lineinfo>)
  target_link_libraries(${target} PRIVATE hawk_support)
  # HAWK_BUILD_SM90A (rglru/wgmma_chunked_config.cuh) where the target is built for sm_90a and not for plain sm_90:
  # the promise that lets forward() run the Hopper chunked forward. Read from the target's final architectures.
  set(archs "$<TARGET_PROPERTY:${target},CUDA_ARCHITECTURES>")
  target_compile_definitions(${target} PRIVATE
    "$<$<AND:$<IN_LIST:90a,${archs}>,$<NOT:$<IN_LIST:90,${archs}>>>:HAWK_BUILD_SM90A>")
  # HAWK_SHARED_MEMORY_LIMIT (CMakeLists.txt): the dispatch sized for a smaller GPU's shared memory.
  if(NOT "${HAWK_SHARED_MEMORY_LIMIT}" STREQUAL "")
    target_compile_definitions(${target} PRIVATE HAWK_SHARED_MEMORY_LIMIT=${HAWK_SHARED_MEMORY_LIMIT})
  endif()
endfunction()
