# tests/package/install_fresh.cmake — `cmake -DBUILD_DIR=... -DPREFIX=... -P install_fresh.cmake`:
# installs the build tree BUILD_DIR into PREFIX, emptied first, so that no file of an
# earlier install (a header since removed or made internal) is left for the tests to find.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX} COMMAND_ERROR_IS_FATAL ANY)
