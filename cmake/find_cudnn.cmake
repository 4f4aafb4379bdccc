# cmake/find_cudnn.cmake — where cuDNN is: MG_CUDNN_INCLUDE_DIR (cudnn.h) and
# MG_CUDNN_LIBRARY (cache entries, ...-NOTFOUND when absent), and when both are found the
# imported target memgrad::cudnn that carries them. Looked for next to the CUDA toolkit
# first (find_package(CUDAToolkit) must have run), then in Debian's multiarch folders.
# The build (CMakeLists.txt) and the installed package (memgradConfig.cmake) both include
# this file, so a user's project finds cuDNN where memgrad's build did, on its own machine,
# and no path of the machine that built memgrad is written into the package.
find_path(MG_CUDNN_INCLUDE_DIR cudnn.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include/x86_64-linux-gnu)
find_library(MG_CUDNN_LIBRARY cudnn
  HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
if(MG_CUDNN_INCLUDE_DIR AND MG_CUDNN_LIBRARY AND NOT TARGET memgrad::cudnn)
  add_library(memgrad::cudnn UNKNOWN IMPORTED)
  set_target_properties(memgrad::cudnn PROPERTIES
    IMPORTED_LOCATION ${MG_CUDNN_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${MG_CUDNN_INCLUDE_DIR})
endif()
