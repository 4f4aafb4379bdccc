# tests/package/readme_shows_consumer.cmake — `cmake -DREADME=... -DCONSUMER_DIR=... -P ...`:
# fails unless README.md shows tests/consumer/CMakeLists.txt exactly, as a ```cmake block,
# and, within its first screen (40 lines), the region of tests/consumer/main.cpp between
# `// [readme]` and `// [readme: end]` (unindented) as a ```cpp block: the file a reader
# copies and the first example they read are the ones ctest builds and runs.
file(READ ${README} readme)
file(READ ${CONSUMER_DIR}/CMakeLists.txt consumer)
string(FIND "${readme}" "```cmake\n${consumer}```\n" position)
if(position EQUAL -1)
  message(FATAL_ERROR "${README} does not show ${CONSUMER_DIR}/CMakeLists.txt as it is: copy the file into "
                      "its ```cmake block (\"Use memgrad in your project\")")
endif()

file(READ ${CONSUMER_DIR}/main.cpp program)
string(REGEX MATCH "// \\[readme\\]\n(.*)\n[ ]*// \\[readme: end\\]" region "${program}")
if(NOT region)
  message(FATAL_ERROR "${CONSUMER_DIR}/main.cpp has no // [readme] ... // [readme: end] region")
endif()
string(REPLACE "\n  " "\n" snippet "\n${CMAKE_MATCH_1}\n")  # without main()'s indent
string(SUBSTRING "${snippet}" 1 -1 snippet)
string(FIND "${readme}" "```cpp\n${snippet}```\n" position)
if(position EQUAL -1)
  message(FATAL_ERROR "${README} does not show the [readme] region of ${CONSUMER_DIR}/main.cpp as it is, "
                      "unindented, as a ```cpp block: copy it in")
endif()
string(SUBSTRING "${readme}" 0 ${position} before)
string(REGEX MATCHALL "\n" lines_before "${before}")
list(LENGTH lines_before line)
if(line GREATER 40)
  message(FATAL_ERROR "${README} shows the first example at line ${line}: keep it within the first 40 lines")
endif()
