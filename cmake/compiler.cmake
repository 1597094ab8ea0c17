# Warnings, sanitizers and ccache for every target of the project.

find_program(RANKSCOPE_CCACHE ccache)
if(RANKSCOPE_CCACHE)
  set(CMAKE_C_COMPILER_LAUNCHER "${RANKSCOPE_CCACHE}")
  set(CMAKE_CXX_COMPILER_LAUNCHER "${RANKSCOPE_CCACHE}")
  set(CMAKE_CUDA_COMPILER_LAUNCHER "${RANKSCOPE_CCACHE}")
endif()

set(RANKSCOPE_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined")

add_library(rankscope_warnings INTERFACE)
target_compile_options(rankscope_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wcast-align -Wunused -Woverloaded-virtual -Wimplicit-fallthrough>)
# Not for a target whose RANKSCOPE_CLI11_GLUE property is on: GCC 12 at -O1 sees a "potential
# null pointer dereference" inside CLI11's own string splitting (CLI/StringTools.hpp), a
# false positive in a library header, inlined into whichever file declares options.
target_compile_options(rankscope_warnings INTERFACE
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<BOOL:$<TARGET_PROPERTY:RANKSCOPE_CLI11_GLUE>>>>:-Wnull-dereference>")
if(RANKSCOPE_WERROR)
  target_compile_options(rankscope_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

if(RANKSCOPE_SANITIZE)
  add_compile_options(
    $<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${RANKSCOPE_SANITIZE}>
    $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
    $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=all>)
  add_link_options(-fsanitize=${RANKSCOPE_SANITIZE})
endif()
