# Resolves COHORT_WITH_TORCH / _MPI / _NCCL from AUTO|ON|OFF to a found flag
# (COHORT_HAVE_TORCH, ...), printing one line for each that ends up off.

function(cohort_resolve_option name found reason)
  set(value "${${name}}")
  string(TOUPPER "${value}" value)
  if(value STREQUAL "OFF")
    message(STATUS "cohort: ${name}=OFF (disabled by the option)")
    set(${name}_ENABLED OFF PARENT_SCOPE)
  elseif(found)
    set(${name}_ENABLED ON PARENT_SCOPE)
    message(STATUS "cohort: ${name} on")
  elseif(value STREQUAL "ON")
    message(FATAL_ERROR "cohort: ${name}=ON but ${reason}")
  else()
    message(STATUS "cohort: ${name} off: ${reason}")
    set(${name}_ENABLED OFF PARENT_SCOPE)
  endif()
endfunction()

# The project's Python: COHORT_PYTHON (default python3 on PATH). Its pip
# packages bring libtorch (torch==2.13.0, CPU build) and, when installed,
# NCCL (nvidia-nccl-cu13). COHORT_PYTHON_EXECUTABLE is the interpreter's
# real path (a pyenv shim resolved), which tests and benchmarks use to run
# torch's Python side.
set(COHORT_PYTHON "python3" CACHE STRING "The Python whose torch (and NCCL) packages cohort builds against")
set(COHORT_PYTHON_EXECUTABLE "")
find_program(_cohort_python_program NAMES ${COHORT_PYTHON})
# cohort_python_probe(VAR CODE): VAR = what CODE prints in that Python, or
# empty when the Python or the module is missing.
function(cohort_python_probe var code)
  set(${var} "" PARENT_SCOPE)
  if(_cohort_python_program)
    execute_process(COMMAND ${_cohort_python_program} -c "${code}" OUTPUT_VARIABLE out
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0)
      set(${var} "${out}" PARENT_SCOPE)
    endif()
  endif()
endfunction()
cohort_python_probe(COHORT_PYTHON_EXECUTABLE "import sys; print(sys.executable)")

# libtorch: TorchConfig.cmake lies under torch.utils.cmake_prefix_path, so
# C++ programs and Python ones share one libtorch.
set(_torch_found FALSE)
if(NOT COHORT_WITH_TORCH STREQUAL "OFF")
  cohort_python_probe(_torch_probe "import torch; print(torch.utils.cmake_prefix_path + ';' + torch.__version__)")
  if(_torch_probe)
    list(GET _torch_probe 0 COHORT_TORCH_CMAKE_PREFIX)
    list(GET _torch_probe 1 COHORT_TORCH_VERSION)
    list(APPEND CMAKE_PREFIX_PATH "${COHORT_TORCH_CMAKE_PREFIX}")
    # The CPU package has no Kineto: TorchConfig.cmake warns and goes on.
    find_package(Torch QUIET CONFIG)
    set(_torch_found ${Torch_FOUND})
    if(Torch_FOUND)
      message(STATUS "cohort: torch ${COHORT_TORCH_VERSION} (${COHORT_PYTHON_EXECUTABLE})")
    endif()
  endif()
endif()
cohort_resolve_option(COHORT_WITH_TORCH "${_torch_found}"
  "torch not found: '${COHORT_PYTHON} -c \"import torch\"' failed (pip install torch==2.13.0)")

# Open MPI.
set(_mpi_found FALSE)
if(NOT COHORT_WITH_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS C)
  set(_mpi_found ${MPI_C_FOUND})
endif()
cohort_resolve_option(COHORT_WITH_MPI "${_mpi_found}" "MPI not found (apt-get install libopenmpi-dev)")

# NCCL and the CUDA runtime: the runtime under CUDA_HOME (default
# /usr/local/cuda); NCCL there or from the Python's nvidia-nccl-cu13 package,
# which ships nccl.h and libnccl.so.2 only (no unversioned link).
set(_nccl_found FALSE)
if(NOT COHORT_WITH_NCCL STREQUAL "OFF")
  set(_cuda_home "$ENV{CUDA_HOME}")
  if(NOT _cuda_home)
    set(_cuda_home /usr/local/cuda)
  endif()
  cohort_python_probe(_nccl_pip "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])")
  find_path(COHORT_NCCL_INCLUDE_DIR nccl.h HINTS ${_cuda_home}/include ${_nccl_pip}/include)
  find_library(COHORT_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_cuda_home}/lib64 ${_cuda_home}/lib ${_nccl_pip}/lib)
  find_path(COHORT_CUDA_INCLUDE_DIR cuda_runtime_api.h HINTS ${_cuda_home}/include)
  find_library(COHORT_CUDART_LIBRARY cudart HINTS ${_cuda_home}/lib64 ${_cuda_home}/lib)
  if(COHORT_NCCL_INCLUDE_DIR AND COHORT_NCCL_LIBRARY AND COHORT_CUDA_INCLUDE_DIR AND COHORT_CUDART_LIBRARY)
    # Both folders, NCCL's first: nccl.h from its own package, the CUDA
    # runtime's headers from the toolkit.
    set(COHORT_NCCL_INCLUDE_DIRS ${COHORT_NCCL_INCLUDE_DIR} ${COHORT_CUDA_INCLUDE_DIR})
    set(_nccl_found TRUE)
  endif()
endif()
cohort_resolve_option(COHORT_WITH_NCCL "${_nccl_found}"
  "nccl.h/libnccl/libcudart not found under CUDA_HOME, /usr/local/cuda or the Python's nvidia-nccl-cu13 package")

# The Python extension cohort_torch (python/): needs the torch layer and the
# headers of the Python that has torch (pybind11 comes with torch).
set(_python_found FALSE)
set(_python_reason "needs COHORT_WITH_TORCH and the development headers of ${COHORT_PYTHON}")
if(NOT COHORT_WITH_PYTHON STREQUAL "OFF" AND COHORT_WITH_TORCH_ENABLED)
  set(Python3_EXECUTABLE "${COHORT_PYTHON_EXECUTABLE}")
  find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
  find_library(COHORT_TORCH_PYTHON_LIBRARY torch_python HINTS "${TORCH_INSTALL_PREFIX}/lib")
  if(Python3_Development.Module_FOUND AND COHORT_TORCH_PYTHON_LIBRARY)
    set(_python_found TRUE)
  endif()
endif()
cohort_resolve_option(COHORT_WITH_PYTHON "${_python_found}" "${_python_reason}")
