// core/error.cpp — out-of-line throwers, so that MG_CHECK costs one branch at each site.
#include "memgrad/core/error.h"

namespace mg::detail {

void throw_error(std::string message) { throw Error(std::move(message)); }

void throw_internal_error(const char* file, int line, const char* condition,
                          std::string message) {
  throw Error(str_cat("memgrad internal error at ", file, ":", line, ": `", condition,
                      "` failed. ", message, " (this is a bug in memgrad; please report it)"));
}

}  // namespace mg::detail
