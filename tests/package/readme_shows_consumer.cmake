# tests/package/readme_shows_consumer.cmake — `cmake -DREADME=... -DCONSUMER=... -P ...`:
# fails unless README.md shows tests/consumer/CMakeLists.txt exactly, as a ```cmake block,
# so the file a reader copies is the one ctest builds.
file(READ ${README} readme)
file(READ ${CONSUMER} consumer)
string(FIND "${readme}" "```cmake\n${consumer}```\n" position)
if(position EQUAL -1)
  message(FATAL_ERROR "${README} does not show ${CONSUMER} as it is: copy the file into its ```cmake "
                      "block (\"Use memgrad in your project\")")
endif()
