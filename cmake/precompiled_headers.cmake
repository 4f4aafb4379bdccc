# cmake/precompiled_headers.cmake — MG_PRECOMPILE_HEADERS: a target with many sources parses
# the headers nearly all of them include once (a precompiled header), not once per source.
#
# NOTE: parsing the standard headers and core/tensor.h is most of a typical source's compile:
# measured on clang 14 under ThreadSanitizer (2026-12-07, CPU seconds of one compile, without
# -> with these headers precompiled): nn/linear.cpp 1.68 -> 0.49, optim/adam.cpp 3.10 -> 1.63,
# autograd/unary.cpp 3.36 -> 2.06, core/tensor.cpp 2.86 -> 1.98. CI's builds turn it on to
# keep within their time: scripts/test (the README's test command; with CUDA, for the C++
# sources only: nvcc reads no C++ precompiled header) and the sanitizer builds
# (scripts/test-sanitizers). A build configured by hand leaves it off, and so do the
# developers' builds: there a source that forgets an #include still fails to compile, and
# ccache caches no compile that reads a precompiled header unless configured for it (its
# sloppiness setting).

# The most included headers of memgrad/*.cpp (standard ones, then core/'s: factory.h brings
# tensor.h), all from the lowest room, so no source sees a room above its own through them.
set(mg_precompiled_headers
    <algorithm> <array> <atomic> <cmath> <cstring> <functional> <limits> <map> <memory> <mutex>
    <optional> <sstream> <string> <unordered_map> <utility> <vector>
    <memgrad/core/error.h> <memgrad/core/factory.h>)

# Gives `target`'s C++ sources the headers above, and any more named after it (a test
# program: Catch2's); its CUDA sources none.
function(mg_precompile_headers target)
  if(MG_PRECOMPILE_HEADERS)
    set(headers)
    foreach(header ${mg_precompiled_headers} ${ARGN})
      list(APPEND headers "$<$<COMPILE_LANGUAGE:CXX>:${header}>")
    endforeach()
    target_precompile_headers(${target} PRIVATE ${headers})
  endif()
endfunction()
