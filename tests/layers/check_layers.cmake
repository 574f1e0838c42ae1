# The dependency rule of include/hawk (docs/ARCHITECTURE.md), checked on every header's #include "hawk/..." lines.
# A CMake script so that it runs wherever the project configures (no Python needed on the CI machine).
#
#   cmake -DHAWK_INCLUDE_DIR=<repo>/include -P check_layers.cmake      check the tree; fails listing each violation
#   cmake -DHAWK_SELF_TEST_DIR=<scratch> -P check_layers.cmake         negative control: writes small trees that
#                                                                      break each rule once and fails unless every
#                                                                      one is caught (and a clean tree passes)
#
# Layers, lowest first; a header may include its own layer or a lower one, never a higher one:
#   0 core/                    (includes nothing outside core/)
#   1 a family's foundation    <family>/{arguments, modes, config, chunked_config, compact_config, wgmma_chunked_config,
#                              wgmma_persistent_config, persistent_gate_logits_config, gate_math,
#                              checkpoint_layout, params},
#                              reference/
#   2 <family>/block/          CTA-wide device pieces
#   3 <family>/kernels/        one __global__ family per *_kernel(s).cuh (Params two kernels share: params.hpp)
#   4 <family>/operators/      host operators (a file with can_implement) and what they share (checks, lowering)
#   5 <family>/dispatch.cuh, <family>/context_parallel/
#   6 umbrellas and forwarders: <family>/<family>.cuh, the kept old paths, hawk.cuh
# and, within or across layers:
#   - block/ and kernels/ never include arguments.hpp (kernels read Params, operators lower Arguments to them);
#   - no kernel file includes another kernel file;
#   - no operator includes another operator;
#   - no family includes another family (what both need belongs in core/).
cmake_minimum_required(VERSION 3.25)

# Sets ${out_layer}, ${out_family} for the header `rel` (a path below hawk/).
# The foundation's headers of a family (layer 1), by name.
set(foundation_names "arguments|modes|config|chunked_config|compact_config|wgmma_chunked_config|wgmma_persistent_config|persistent_gate_logits_config|gate_math|checkpoint_layout|params")

function(hawk_layer_of rel out_layer out_family)
  if(rel STREQUAL "hawk.cuh")
    set(${out_layer} 6 PARENT_SCOPE)
    set(${out_family} "all" PARENT_SCOPE)
    return()
  endif()
  string(REGEX MATCH "^[^/]+" family "${rel}")
  # (one whole-string match: CMake's REGEX REPLACE would apply a leading-anchored pattern again and again)
  string(REGEX REPLACE "^[^/]+/(.*)$" "\\1" inner "${rel}")
  if(family STREQUAL "core")
    set(layer 0)
  elseif(family STREQUAL "reference")
    set(layer 1)
  elseif(inner MATCHES "^block/")
    set(layer 2)
  elseif(inner MATCHES "^kernels/")
    set(layer 3)
  elseif(inner MATCHES "^operators/")
    set(layer 4)
  elseif(inner MATCHES "^context_parallel/" OR inner STREQUAL "dispatch.cuh")
    set(layer 5)
  elseif(inner MATCHES "^(${foundation_names})\\.(hpp|cuh)$")
    set(layer 1)
  else()
    set(layer 6)  # the family's umbrella and the forwarders kept at old paths
  endif()
  set(${out_layer} ${layer} PARENT_SCOPE)
  set(${out_family} ${family} PARENT_SCOPE)
endfunction()

# Appends to ${out_violations} one line per broken rule in the tree below `include_dir`.
function(hawk_check_tree include_dir out_violations)
  set(violations "")
  file(GLOB_RECURSE headers RELATIVE ${include_dir}/hawk ${include_dir}/hawk/*.hpp ${include_dir}/hawk/*.cuh)
  if(NOT headers)
    list(APPEND violations "no headers found below ${include_dir}/hawk")
  endif()
  foreach(rel IN LISTS headers)
    hawk_layer_of(${rel} layer family)
    file(STRINGS ${include_dir}/hawk/${rel} lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"hawk/")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^.*\"hawk/([^\"]+)\".*$" "\\1" target "${line}")
      if(NOT EXISTS ${include_dir}/hawk/${target})
        list(APPEND violations "${rel}: includes hawk/${target}, which does not exist")
        continue()
      endif()
      hawk_layer_of(${target} target_layer target_family)
      if(target_layer GREATER layer)
        list(APPEND violations "${rel} (layer ${layer}) includes hawk/${target}, a layer above it (${target_layer})")
      endif()
      if(NOT family STREQUAL "all" AND NOT target_family STREQUAL "core" AND NOT target_family STREQUAL family)
        list(APPEND violations "${rel} includes hawk/${target}, of another family (${target_family})")
      endif()
      if(rel MATCHES "/(block|kernels)/" AND target MATCHES "/arguments\\.hpp$")
        list(APPEND violations "${rel} includes hawk/${target}: block/ and kernels/ read Params, not Arguments")
      endif()
      if(rel MATCHES "/kernels/[^/]*_kernels?\\.cuh$" AND target MATCHES "/kernels/[^/]*_kernels?\\.cuh$")
        list(APPEND violations "${rel} includes hawk/${target}: a kernel includes another kernel (share a block/ piece)")
      endif()
      if(rel MATCHES "/operators/" AND target MATCHES "/operators/")
        file(STRINGS ${include_dir}/hawk/${target} target_operator REGEX "can_implement[ \t]*\\(")
        if(target_operator)
          list(APPEND violations "${rel} includes hawk/${target}: an operator includes another operator")
        endif()
      endif()
    endforeach()
  endforeach()
  set(${out_violations} "${violations}" PARENT_SCOPE)
endfunction()

# Writes one small tree: each argument is "path|content" (content's \n written as lines).
function(hawk_write_tree root)
  file(REMOVE_RECURSE ${root})
  foreach(entry IN LISTS ARGN)
    string(REGEX REPLACE "\\|.*$" "" path "${entry}")
    string(REGEX REPLACE "^[^|]*\\|(.*)$" "\\1" content "${entry}")
    string(REPLACE "\\n" "\n" content "${content}")
    file(WRITE ${root}/hawk/${path} "#pragma once\n${content}\n")
  endforeach()
endfunction()

if(DEFINED HAWK_SELF_TEST_DIR)
  # A clean tree: one header per layer, each including the layer below.
  set(clean
    "core/status.hpp|"
    "fam/config.cuh|#include \"hawk/core/status.hpp\""
    "fam/arguments.hpp|#include \"hawk/core/status.hpp\""
    "fam/block/piece.cuh|#include \"hawk/fam/config.cuh\""
    "fam/kernels/params.hpp|"
    "fam/kernels/a_kernel.cuh|#include \"hawk/fam/block/piece.cuh\"\\n#include \"hawk/fam/kernels/params.hpp\""
    "fam/kernels/b_kernel.cuh|#include \"hawk/fam/block/piece.cuh\""
    "fam/operators/checks.hpp|#include \"hawk/fam/arguments.hpp\""
    "fam/operators/a.cuh|#include \"hawk/fam/kernels/a_kernel.cuh\"\\n#include \"hawk/fam/operators/checks.hpp\"\\nstruct A { static int can_implement(int); };"
    "fam/operators/b.cuh|#include \"hawk/fam/kernels/b_kernel.cuh\"\\nstruct B { static int can_implement(int); };"
    "fam/dispatch.cuh|#include \"hawk/fam/operators/a.cuh\"\\n#include \"hawk/fam/operators/b.cuh\""
    "fam/fam.cuh|#include \"hawk/fam/dispatch.cuh\""
    "other/config.cuh|#include \"hawk/core/status.hpp\""
    "hawk.cuh|#include \"hawk/fam/fam.cuh\"\\n#include \"hawk/other/config.cuh\"")
  hawk_write_tree(${HAWK_SELF_TEST_DIR}/clean ${clean})
  hawk_check_tree(${HAWK_SELF_TEST_DIR}/clean clean_violations)
  if(clean_violations)
    string(REPLACE ";" "\n  " shown "${clean_violations}")
    message(FATAL_ERROR "self-test: the clean tree was refused:\n  ${shown}")
  endif()
  # Each bad case: the clean tree plus one header that breaks one rule, and the words its violation must contain.
  set(cases
    "core_up|core/bad.hpp|#include \"hawk/fam/config.cuh\"|a layer above"
    "block_up|fam/block/bad.cuh|#include \"hawk/fam/kernels/a_kernel.cuh\"|a layer above"
    "kernel_up|fam/kernels/bad_kernel.cuh|#include \"hawk/fam/operators/checks.hpp\"|a layer above"
    "kernel_kernel|fam/kernels/bad_kernel.cuh|#include \"hawk/fam/kernels/a_kernel.cuh\"|a kernel includes another kernel"
    "operator_operator|fam/operators/bad.cuh|#include \"hawk/fam/operators/a.cuh\"|an operator includes another operator"
    "kernel_arguments|fam/kernels/bad_kernel.cuh|#include \"hawk/fam/arguments.hpp\"|not Arguments"
    "other_family|fam/block/bad.cuh|#include \"hawk/other/config.cuh\"|of another family"
    "missing|fam/block/bad.cuh|#include \"hawk/fam/block/gone.cuh\"|does not exist")
  set(failures "")
  foreach(case IN LISTS cases)
    string(REPLACE "|" ";" fields "${case}")
    list(GET fields 0 name)
    list(GET fields 1 path)
    list(GET fields 2 content)
    list(GET fields 3 expected)
    hawk_write_tree(${HAWK_SELF_TEST_DIR}/${name} ${clean} "${path}|${content}")
    hawk_check_tree(${HAWK_SELF_TEST_DIR}/${name} found)
    string(FIND "${found}" "${expected}" at)
    if(at EQUAL -1)
      list(APPEND failures "${name}: expected a violation saying '${expected}', got '${found}'")
    endif()
  endforeach()
  file(REMOVE_RECURSE ${HAWK_SELF_TEST_DIR})
  if(failures)
    string(REPLACE ";" "\n  " shown "${failures}")
    message(FATAL_ERROR "self-test: the check missed broken rules:\n  ${shown}")
  endif()
  list(LENGTH cases count)
  message(STATUS "self-test: the clean tree passes and all ${count} broken rules are caught")
elseif(DEFINED HAWK_INCLUDE_DIR)
  hawk_check_tree(${HAWK_INCLUDE_DIR} violations)
  if(violations)
    list(LENGTH violations count)
    string(REPLACE ";" "\n  " shown "${violations}")
    message(FATAL_ERROR "${count} include(s) break the layering (docs/ARCHITECTURE.md):\n  ${shown}")
  endif()
  message(STATUS "include/hawk keeps its layering")
else()
  message(FATAL_ERROR "usage: cmake -DHAWK_INCLUDE_DIR=<dir> -P check_layers.cmake, or -DHAWK_SELF_TEST_DIR=<dir>")
endif()
