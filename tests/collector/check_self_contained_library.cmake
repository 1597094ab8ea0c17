# The injected library drops into any process (collector/README.md, "Dropping into any
# process"): it needs nothing beyond glibc, libstdc++ and libgcc_s, leaves no SQLite or fmt
# symbol for the loader to bind, and exports exactly its entry points.
#
#   cmake -DLIBRARY=librankscope_collector.so -DREADELF=readelf -DNM=nm
#         [-DSANITIZE=address,undefined] -P check_self_contained_library.cmake
#
# SANITIZE: the build's sanitizers, whose runtimes (libasan, libubsan, libtsan) a sanitizer
# build's library needs as well; they exist only where the sanitizer build runs.
cmake_minimum_required(VERSION 3.25)

foreach(tool LIBRARY READELF NM)
  if(NOT ${tool})
    message(FATAL_ERROR "check_self_contained_library: -D${tool}= is missing")
  endif()
endforeach()

set(allowed_needed libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 ld-linux-x86-64.so.2
    libstdc++.so.6 libgcc_s.so.1)
set(allowed_prefixes "")
if(SANITIZE MATCHES "address")
  list(APPEND allowed_prefixes libasan.so.)
endif()
if(SANITIZE MATCHES "undefined")
  list(APPEND allowed_prefixes libubsan.so.)
endif()
if(SANITIZE MATCHES "thread")
  list(APPEND allowed_prefixes libtsan.so.)
endif()

set(expected_exports
    InitializeInjection InitializeInjectionNvtx2 InitializeInjectionNvtxExtension
    ncclProfiler_v3 ncclProfiler_v4 ncclProfiler_v5
    rankscope_hook_active rankscope_hook_collective rankscope_hook_collective_begin rankscope_hook_meta rankscope_hook_range rankscope_hook_version
    execl execle execlp execv execve execvp execvpe fexecve)

function(run_tool out)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE output ERROR_VARIABLE error RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "check_self_contained_library: `${ARGN}` failed (${status}): ${error}")
  endif()
  set(${out} "${output}" PARENT_SCOPE)
endfunction()

set(problems "")

run_tool(dynamic ${READELF} -d --wide ${LIBRARY})
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]+\\]" needed_lines "${dynamic}")
set(needed "")
foreach(line IN LISTS needed_lines)
  string(REGEX REPLACE ".*\\[([^]]+)\\]$" "\\1" soname "${line}")
  list(APPEND needed ${soname})
  set(allowed FALSE)
  if(soname IN_LIST allowed_needed)
    set(allowed TRUE)
  endif()
  foreach(prefix IN LISTS allowed_prefixes)
    string(FIND "${soname}" "${prefix}" at)
    if(at EQUAL 0)
      set(allowed TRUE)
    endif()
  endforeach()
  if(NOT allowed)
    list(APPEND problems "needs ${soname}, which a host process may lack or have in another version")
  endif()
endforeach()
if(NOT "libc.so.6" IN_LIST needed)
  list(APPEND problems "no NEEDED libc.so.6: `${READELF} -d` was not read right")
endif()

# Undefined dynamic symbols bind to whatever the process has: none may be SQLite's or fmt's.
run_tool(undefined ${NM} -D --undefined-only ${LIBRARY})
string(REGEX MATCHALL "[^ \n]*(sqlite3|3fmt)[^ \n]*" foreign "${undefined}")
foreach(symbol IN LISTS foreign)
  list(APPEND problems "leaves ${symbol} to the host process")
endforeach()

run_tool(defined ${NM} -D --defined-only ${LIBRARY})
string(REGEX MATCHALL "[0-9a-f]+ [A-Za-z] [^\n]+" export_lines "${defined}")
set(exports "")
foreach(line IN LISTS export_lines)
  string(REGEX REPLACE "^[0-9a-f]+ [A-Za-z] ([^@ ]+).*" "\\1" symbol "${line}")
  list(APPEND exports ${symbol})
endforeach()
list(SORT exports)
set(expected ${expected_exports})
list(SORT expected)
if(NOT exports STREQUAL expected)
  set(extra ${exports})
  list(REMOVE_ITEM extra ${expected})
  set(missing ${expected})
  list(REMOVE_ITEM missing ${exports})
  foreach(symbol IN LISTS extra)
    list(APPEND problems "exports ${symbol}, which is no entry point (collector/exports.map)")
  endforeach()
  foreach(symbol IN LISTS missing)
    list(APPEND problems "does not export the entry point ${symbol}")
  endforeach()
endif()

if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "check_self_contained_library: ${LIBRARY}:\n  ${text}")
endif()
list(LENGTH exports export_count)
list(JOIN needed ", " needed_text)
message(STATUS "check_self_contained_library: needs ${needed_text}; exports the ${export_count} entry points")
