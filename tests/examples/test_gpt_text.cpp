// tests/examples/test_gpt_text.cpp — what the gpt program takes as text: well-formed UTF-8
// without NUL bytes, checked as Unicode's table 3-7 defines it. Each kind of bad byte
// (NUL, a stray continuation byte, overlong forms, surrogates, code points above U+10FFFF,
// bytes no sequence begins with, sequences cut short) is refused with an error that names
// the file, the byte offset where the bad sequence begins, and what is wrong there; the
// first and last code point of every sequence length is accepted.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <utility>

#include "examples/program_runner.h"

using Catch::Matchers::Contains;
using mg_test::Outcome;
using mg_test::TempDir;

namespace {

// "naïve café " in UTF-8: 13 bytes, two of them 2-byte sequences, so that an offset counts
// bytes, not characters.
const std::string kPrefix = "na\xC3\xAFve caf\xC3\xA9 ";
// Enough text after the bad bytes for a window of the tiny preset (block 64) in each part.
const std::string kFiller(1000, 'x');

std::string write_text(const TempDir& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir.file(name), std::ios::binary) << bytes;
  return dir.file(name);
}

Outcome read_text(const TempDir& dir, const std::string& path) {
  // --dump-windows reads and checks the text, then writes one step's windows: no training.
  return mg_test::run_program(dir, "gpt", "--data " + path + " --preset tiny --steps 1 --batch 1 --dump-windows " +
                                              dir.file("windows.safetensors"));
}

}  // namespace

TEST_CASE("gpt refuses text that is not UTF-8, naming the byte offset and the problem", "[examples][gpt]") {
  TempDir dir("gpt-text");
  const std::pair<std::string, std::string> cases[] = {
      {std::string(1, '\0'), "a NUL byte (binary data)"},
      {"\x80", "a continuation byte that no sequence began (80)"},
      {"\xBF", "a continuation byte that no sequence began (BF)"},
      {"\xC0\xAF", "an overlong form (C0 AF)"},  // '/' in two bytes
      {"\xC1\xBF", "an overlong form (C1 BF)"},
      {"\xE0\x80\xAF", "an overlong form (E0 80 AF)"},  // '/' in three bytes
      {"\xE0\x9F\xBF", "an overlong form (E0 9F BF)"},  // U+07FF in three bytes
      {"\xF0\x80\x80\xAF", "an overlong form (F0 80 80 AF)"},
      {"\xF0\x8F\xBF\xBF", "an overlong form (F0 8F BF BF)"},  // U+FFFF in four bytes
      {"\xED\xA0\x80", "a surrogate (U+D800..U+DFFF), which UTF-8 does not encode (ED A0 80)"},
      {"\xED\xBF\xBF", "a surrogate (U+D800..U+DFFF), which UTF-8 does not encode (ED BF BF)"},
      {"\xF4\x90\x80\x80", "a code point above U+10FFFF (F4 90 80 80)"},
      {"\xF5\x80\x80\x80", "a byte that no UTF-8 sequence begins with (F5)"},
      {"\xFF", "a byte that no UTF-8 sequence begins with (FF)"},
      {"\xC3 ", "a 2-byte sequence cut short: byte 2 is not a continuation byte (C3 20)"},
      {"\xE2\x82x", "a 3-byte sequence cut short: byte 3 is not a continuation byte (E2 82 78)"},
      {"\xF0\x9F\x98\xC3\xA9", "a 4-byte sequence cut short: byte 4 is not a continuation byte (F0 9F 98 C3)"},
  };
  for (const auto& [bad, problem] : cases) {
    const std::string path = write_text(dir, "bad.txt", kPrefix + bad + kFiller);
    const Outcome outcome = read_text(dir, path);
    INFO(problem << "\n" << outcome.err);
    CHECK(outcome.exit_code == 1);
    CHECK_THAT(outcome.err, Contains("--data '" + path + "' is not UTF-8 text: at byte offset 13, " + problem + "."));
  }
  // A sequence the file ends in the middle of.
  const std::string path = write_text(dir, "cut.txt", kPrefix + kFiller + "\xE2\x82");
  const Outcome cut = read_text(dir, path);
  CHECK(cut.exit_code == 1);
  CHECK_THAT(cut.err, Contains("at byte offset " + std::to_string(13 + kFiller.size()) +
                               ", a 3-byte sequence cut short by the end of the text (E2 82)."));
}

TEST_CASE("gpt takes the first and last code point of each UTF-8 length as text", "[examples][gpt]") {
  TempDir dir("gpt-text");
  const std::string boundaries =
      "\x7F"                                  // U+007F
      "\xC2\x80" "\xDF\xBF"                   // U+0080, U+07FF
      "\xE0\xA0\x80" "\xED\x9F\xBF"           // U+0800, U+D7FF (below the surrogates)
      "\xEE\x80\x80" "\xEF\xBF\xBF"           // U+E000 (above them), U+FFFF
      "\xF0\x90\x80\x80" "\xF4\x8F\xBF\xBF";  // U+10000, U+10FFFF
  const Outcome outcome = read_text(dir, write_text(dir, "good.txt", kPrefix + boundaries + kFiller));
  INFO(outcome.err);
  CHECK(outcome.exit_code == 0);
  CHECK_THAT(outcome.out, Contains("the training windows of 1 steps written to"));
}
