# ctest: the CUDA compile command must produce sm_90 machine code and compute_90 PTX.
# Run with -DCOMPILE_COMMANDS=<build>/compile_commands.json.
file(READ "${COMPILE_COMMANDS}" commands)
string(REGEX MATCH "\"command\": \"[^\"]*cuda_smoke\\.cu[^\"]*\"" smoke "${commands}")
if(NOT smoke)
  message(FATAL_ERROR "no compile command for cuda_smoke.cu in ${COMPILE_COMMANDS}")
endif()
if(NOT smoke MATCHES "code=\\[compute_90,sm_90\\]")
  message(FATAL_ERROR "CUDA code is not built for sm_90 + compute_90 PTX: ${smoke}")
endif()
message(STATUS "CUDA targets sm_90 with compute_90 PTX")
