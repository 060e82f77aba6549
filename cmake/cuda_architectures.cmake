# Which GPUs the CUDA code is compiled for (CMAKE_CUDA_ARCHITECTURES), decided before
# enable_language(CUDA), which would otherwise take nvcc's own default (sm_75 on CUDA 13).
#
#   (not set)  machine code for A100 (sm_80), H100/H200 (sm_90) and, where this nvcc knows it
#              (CUDA 12.8 on), B200 (sm_100); plus PTX of the newest of them, which the driver
#              compiles at start-up for any later GPU (RTX 50xx, GB300, ...).
#   native     the GPUs of this machine (nvidia-smi's compute capabilities): the quickest
#              build, for a build on the machine that runs it. With no GPU visible, nvcc
#              would build for its own old default, so the list above is taken instead.
#   a list     as CMake takes it, e.g. "90-real;90-virtual".
# Given as -DCMAKE_CUDA_ARCHITECTURES=..., or by the environment variable CUDAARCHS (CMake's own).
function(parbench_choose_cuda_architectures)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES "$ENV{CUDAARCHS}" CACHE STRING "CUDA architectures (a list, or native)")
  endif()
  execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch OUTPUT_VARIABLE known ERROR_QUIET)
  set(portable 80-real 90-real 90-virtual)
  if(known MATCHES "compute_100")
    set(portable 80-real 90-real 100-real 100-virtual)
  endif()
  if(CMAKE_CUDA_ARCHITECTURES STREQUAL "native")
    find_program(PARBENCH_NVIDIA_SMI nvidia-smi)
    set(capabilities "")
    if(PARBENCH_NVIDIA_SMI)
      execute_process(COMMAND ${PARBENCH_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                      OUTPUT_VARIABLE capabilities ERROR_QUIET RESULT_VARIABLE failed)
      if(failed)
        set(capabilities "")
      endif()
    endif()
    string(REGEX MATCHALL "[0-9]+\\.[0-9]+" capabilities "${capabilities}")
    if(NOT capabilities)
      message(STATUS "parbench: CMAKE_CUDA_ARCHITECTURES=native but no GPU is visible here: building for ${portable}")
      set(CMAKE_CUDA_ARCHITECTURES ${portable} PARENT_SCOPE)  # this configure only: native stays asked for
      return()
    endif()
  elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES ${portable} CACHE STRING "CUDA architectures (a list, or native)")
  endif()
  message(STATUS "parbench: CUDA architectures ${CMAKE_CUDA_ARCHITECTURES}")
endfunction()
