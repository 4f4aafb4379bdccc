# cmake/find_nccl.cmake — where NCCL is: MG_NCCL_INCLUDE_DIR (nccl.h) and MG_NCCL_LIBRARY
# (cache entries, ...-NOTFOUND when absent), and when both are found the imported target
# memgrad::nccl that carries them. Looked for in MG_NCCL_ROOT, next to the CUDA toolkit
# (find_package(CUDAToolkit) must have run), then in Debian's folders. The runtime package
# alone (libnccl2) has only libnccl.so.2, without the development link libnccl.so: that
# name is looked for too. Included by the build (CMakeLists.txt) and by the installed
# package (memgradConfig.cmake), as find_cudnn.cmake is.
find_path(MG_NCCL_INCLUDE_DIR nccl.h
  HINTS ${MG_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/include/x86_64-linux-gnu)
find_library(MG_NCCL_LIBRARY NAMES nccl libnccl.so.2
  HINTS ${MG_NCCL_ROOT}/lib ${MG_NCCL_ROOT}/lib64 ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu)
if(MG_NCCL_INCLUDE_DIR AND MG_NCCL_LIBRARY AND NOT TARGET memgrad::nccl)
  add_library(memgrad::nccl UNKNOWN IMPORTED)
  set_target_properties(memgrad::nccl PROPERTIES
    IMPORTED_LOCATION ${MG_NCCL_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${MG_NCCL_INCLUDE_DIR})
endif()
