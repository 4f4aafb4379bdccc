# cmake/public_headers.cmake — which of memgrad's headers are public (installed): every .h
# under memgrad/ that a CPU-only user can compile. A header is internal when it includes a
# header of the CUDA toolkit (cuda_runtime.h, cublas_v2.h, cudnn.h, nvml.h, ...), a .cuh
# file, or an internal header; .cuh files are internal themselves. The sets are read from
# the #include lines, so a new header is placed without being named anywhere.
#
# NOTE: the #include lines are read when CMake configures. A new or removed header re-runs
# the configuration (the glob), an edited #include line does not: a public header that has
# since started to include CUDA fails "package: every public header compiles on its own"
# (no CUDA include path there) until the next configuration leaves it out.

# Headers of the CUDA toolkit and its libraries (CUB, Thrust, libcu++ included).
set(mg_cuda_header_regex
  "^((cuda|cublas|cudnn|curand|cufft|cusparse|cusolver|nccl|nvml|nvrtc|nvtx)[A-Za-z0-9_]*|cooperative_groups|mma)\\.h$|^(thrust|cub|cuda|nvtx3|cooperative_groups)/|\\.cuh$")

# Sets <out_var> to the public headers, as paths relative to <root> ("memgrad/nn/linear.h").
function(mg_public_headers out_var root)
  file(GLOB_RECURSE headers RELATIVE ${root} CONFIGURE_DEPENDS ${root}/memgrad/*.h ${root}/memgrad/*.cuh)
  set(internal)
  foreach(header ${headers})
    set(includes_of_${header})
    if(header MATCHES "\\.cuh$")
      list(APPEND internal ${header})
    endif()
    file(STRINGS ${root}/${header} include_lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line ${include_lines})
      if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"]")
        continue()
      endif()
      set(included ${CMAKE_MATCH_1})
      if(included MATCHES "${mg_cuda_header_regex}")
        list(APPEND internal ${header})
      elseif(included MATCHES "^memgrad/" AND EXISTS ${root}/${included})
        list(APPEND includes_of_${header} ${included})
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES internal)

  # What includes an internal header is internal too: repeat until nothing changes.
  set(changed TRUE)
  while(changed)
    set(changed FALSE)
    foreach(header ${headers})
      if(header IN_LIST internal)
        continue()
      endif()
      foreach(included ${includes_of_${header}})
        if(included IN_LIST internal)
          list(APPEND internal ${header})
          set(changed TRUE)
          break()
        endif()
      endforeach()
    endforeach()
  endwhile()

  # DESIGN.md: only cuda/ touches the CUDA runtime. A header elsewhere that does is not
  # installed, and the user would find a room's header missing: say so.
  foreach(header ${internal})
    if(NOT header MATCHES "^memgrad/cuda/")
      message(WARNING "${header} includes CUDA headers (directly or through another header) but is "
                      "outside memgrad/cuda/: it is not installed. Move what needs CUDA into cuda/.")
    endif()
  endforeach()

  if(internal)
    list(REMOVE_ITEM headers ${internal})
  endif()
  set(${out_var} ${headers} PARENT_SCOPE)
endfunction()
