# cmake/install.cmake — memgrad as an installed package: `cmake --install build --prefix P`
# puts the public headers under P/include/memgrad/ (the rooms as in the tree), the library
# under P/lib/, and under P/lib/cmake/memgrad/ the files that let find_package(memgrad)
# give a user's project the imported target memgrad::memgrad. Included from CMakeLists.txt
# once the memgrad target is complete.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
include(${CMAKE_CURRENT_LIST_DIR}/public_headers.cmake)

set(mg_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/memgrad)

# Headers: only those a CPU-only user can compile (cmake/public_headers.cmake); the ones
# that include CUDA's headers stay inside the library.
mg_public_headers(mg_public_headers ${PROJECT_SOURCE_DIR})
foreach(header ${mg_public_headers})
  get_filename_component(header_dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${header_dir})
endforeach()
target_include_directories(memgrad PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# A library built with the sanitizers (MG_SANITIZE, MG_TSAN) needs their run-time in every program
# that links it: the options the tree links with travel with the installed target.
get_directory_property(mg_tree_link_options DIRECTORY ${PROJECT_SOURCE_DIR} LINK_OPTIONS)
if(mg_tree_link_options)
  target_link_options(memgrad INTERFACE "$<INSTALL_INTERFACE:${mg_tree_link_options}>")
endif()

install(TARGETS memgrad EXPORT memgradTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT memgradTargets NAMESPACE memgrad:: DESTINATION ${mg_package_dir})

set(mg_package_with_cuda ${MG_WITH_CUDA})
set(mg_package_with_mpi ${MG_WITH_MPI})
if(MG_WITH_CUDA AND MG_WITH_NCCL)  # MG_WITH_NCCL exists only with MG_WITH_CUDA
  set(mg_package_with_nccl ON)
else()
  set(mg_package_with_nccl OFF)
endif()
if(MG_WITH_CUDA AND MG_WITH_CUDNN)  # MG_WITH_CUDNN exists only with MG_WITH_CUDA
  set(mg_package_with_cudnn ON)
else()
  set(mg_package_with_cudnn OFF)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/memgradConfig.cmake.in
  ${PROJECT_BINARY_DIR}/memgradConfig.cmake INSTALL_DESTINATION ${mg_package_dir})
# NOTE: memgrad is at 0.x, where a new minor version may change the API (semantic
# versioning's rule for 0.y.z): find_package(memgrad 0.2) accepts 0.2.*, not 0.3.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/memgradConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/memgradConfig.cmake ${PROJECT_BINARY_DIR}/memgradConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/find_cudnn.cmake ${CMAKE_CURRENT_LIST_DIR}/find_nccl.cmake
        DESTINATION ${mg_package_dir})
