# cmake/precompiled_headers.cmake — MG_PRECOMPILE_HEADERS: a target with many sources parses
# the headers nearly all of them include once (a precompiled header), not once per source.
#
# NOTE: parsing the standard headers and core/tensor.h is most of a typical source's compile:
# measured on clang 14 under ThreadSanitizer (2026-12-07, CPU seconds of one compile, without
# -> with these headers precompiled): nn/linear.cpp 1.68 -> 0.49, optim/adam.cpp 3.10 -> 1.63,
# autograd/unary.cpp 3.36 -> 2.06, core/tensor.cpp 2.86 -> 1.98. The sanitizer builds
# (scripts/test-sanitizers) turn it on to keep CI within its time. Every other build leaves it
# off: there a source that forgets an #include still fails to compile, and ccache, which the
# developers' builds use, caches no compile that reads a precompiled header unless configured
# for it (its sloppiness setting). The sanitizer builds are CPU-only, and the CUDA sources
# are not meant to read a C++ precompiled header, so the option refuses a CUDA build.

if(MG_PRECOMPILE_HEADERS AND MG_WITH_CUDA)
  message(FATAL_ERROR "MG_PRECOMPILE_HEADERS serves the CPU-only sanitizer builds: configure with "
                      "-DMG_WITH_CUDA=OFF, or leave MG_PRECOMPILE_HEADERS off")
endif()

# The most included headers of memgrad/*.cpp (standard ones, then core/'s: factory.h brings
# tensor.h), all from the lowest room, so no source sees a room above its own through them.
set(mg_precompiled_headers
    <algorithm> <array> <atomic> <cmath> <cstring> <functional> <limits> <map> <memory> <mutex>
    <optional> <sstream> <string> <unordered_map> <utility> <vector>
    <memgrad/core/error.h> <memgrad/core/factory.h>)

# Gives `target` the headers above, and any more named after it (a test program: Catch2's).
function(mg_precompile_headers target)
  if(MG_PRECOMPILE_HEADERS)
    target_precompile_headers(${target} PRIVATE ${mg_precompiled_headers} ${ARGN})
  endif()
endfunction()
