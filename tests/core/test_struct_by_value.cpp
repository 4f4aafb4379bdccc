// tests/core/test_struct_by_value.cpp — a struct passed by value arrives as it was built.
// GCC 12 with AVX-512 (-march=native, memgrad's default) mis-builds the copy of a struct
// whose first 32 bytes are {1, 1, 0, 0} as int64s: it stores a broadcast of 1 (CMakeLists.txt,
// MG_NATIVE_ARCH). nn::Conv2d's default options met it as padding (1, 0). This is the
// smallest case; it fails if the build's guard against that bug ever goes.
#include <catch2/catch.hpp>

#include <cstdint>

namespace {

struct SevenWords {
  int64_t a, b, c, d, e, f, g;
};

// noipa: the copy must be made for a real call, as for a constructor in another file.
__attribute__((noipa)) SevenWords received(SevenWords words) { return words; }

}  // namespace

TEST_CASE("a struct passed by value arrives as it was built (GCC 12 AVX-512 broadcast bug)", "[build]") {
  const SevenWords sent{1, 1, 0, 0, 1, 1, 1};
  const SevenWords got = received(sent);
  CHECK(got.a == 1);
  CHECK(got.b == 1);
  CHECK(got.c == 0);
  CHECK(got.d == 0);
  CHECK(got.e == 1);
  CHECK(got.f == 1);
  CHECK(got.g == 1);
}
