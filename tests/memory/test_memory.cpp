// tests/memory/test_memory.cpp — mg::memory snapshots, report and JSON, and JsonWriter.
//
// Other tests in this program may still hold memory on the CPU, so checks on live devices
// compare snapshots taken before and after (deltas), never absolute values. Exact JSON
// text is checked on a snapshot built by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/io/json.h"
#include "memgrad/memory/snapshot.h"

namespace {

using mg::Device;
using mg::MemoryCategory;
namespace memory = mg::memory;

int64_t delta(const memory::Snapshot& after, const memory::Snapshot& before, MemoryCategory c) {
  return after.category(c).current - before.category(c).current;
}

}  // namespace

TEST_CASE("snapshot counts a tensor's bytes under its category", "[memory]") {
  const memory::Snapshot before = memory::snapshot();
  mg::Tensor batch = mg::empty({256}, {.category = MemoryCategory::Input});  // 1024 bytes
  const memory::Snapshot after = memory::snapshot();

  CHECK(after.device == Device::cpu());
  CHECK(delta(after, before, MemoryCategory::Input) == 1024);
  for (MemoryCategory other : {MemoryCategory::Parameter, MemoryCategory::Gradient,
                               MemoryCategory::OptimizerState, MemoryCategory::Activation,
                               MemoryCategory::Temporary, MemoryCategory::Workspace,
                               MemoryCategory::AutocastCache, MemoryCategory::Communication}) {
    CHECK(delta(after, before, other) == 0);
  }
  CHECK(after.requested_bytes - before.requested_bytes == 1024);
  CHECK(after.allocated_bytes - before.allocated_bytes == 1024);  // 2 x 512: no rounding
  CHECK(after.num_allocations - before.num_allocations == 1);
  CHECK(after.reserved_bytes >= after.allocated_bytes);

  // Re-tagging moves the bytes to the new category.
  batch.set_memory_category(MemoryCategory::Parameter);
  const memory::Snapshot retagged = memory::snapshot();
  CHECK(delta(retagged, before, MemoryCategory::Input) == 0);
  CHECK(delta(retagged, before, MemoryCategory::Parameter) == 1024);
}

TEST_CASE("peaks outlive freed tensors until reset_peak_stats", "[memory]") {
  memory::reset_peak_stats();
  const memory::Snapshot before = memory::snapshot();
  const memory::CategoryBytes input_before = before.category(MemoryCategory::Input);
  CHECK(input_before.peak == input_before.current);
  CHECK(before.peak_allocated_bytes == before.allocated_bytes);
  {
    mg::Tensor batch = mg::empty({256}, {.category = MemoryCategory::Input});
  }
  const memory::Snapshot freed = memory::snapshot();
  CHECK(delta(freed, before, MemoryCategory::Input) == 0);
  CHECK(freed.category(MemoryCategory::Input).peak == input_before.current + 1024);
  CHECK(freed.peak_allocated_bytes == before.allocated_bytes + 1024);
  CHECK(freed.peak_requested_bytes == before.requested_bytes + 1024);

  memory::reset_peak_stats();
  const memory::Snapshot reset = memory::snapshot();
  const memory::CategoryBytes input_reset = reset.category(MemoryCategory::Input);
  CHECK(input_reset.peak == input_reset.current);
  CHECK(reset.peak_allocated_bytes == reset.allocated_bytes);
  CHECK(reset.peak_reserved_bytes == reset.reserved_bytes);
}

TEST_CASE("snapshot of a simulated device sees tensors that have no data", "[memory]") {
  const Device device = Device::simulated(14);
  const memory::Snapshot before = memory::snapshot(device);
  // 3 MiB: a large-pool request, which takes a 20 MiB segment when none is cached.
  mg::Tensor weights =
      mg::empty({3 << 18}, {.device = device, .category = MemoryCategory::Parameter});
  const memory::Snapshot after = memory::snapshot(device);
  CHECK(after.device == device);
  CHECK(delta(after, before, MemoryCategory::Parameter) == 3 << 20);
  CHECK(after.allocated_bytes - before.allocated_bytes == 3 << 20);
  CHECK(after.reserved_bytes >= after.allocated_bytes);
}

TEST_CASE("to_json writes every number of a snapshot", "[memory]") {
  memory::Snapshot snapshot;
  snapshot.device = Device::cuda(1);
  snapshot.allocated_bytes = 1;
  snapshot.reserved_bytes = 2;
  snapshot.peak_allocated_bytes = 3;
  snapshot.peak_reserved_bytes = 4;
  snapshot.requested_bytes = 5;
  snapshot.peak_requested_bytes = 6;
  snapshot.active_bytes = 7;
  snapshot.inactive_split_bytes = 8;
  snapshot.num_allocations = 9;
  snapshot.num_segments = 10;
  snapshot.num_alloc_retries = 11;
  snapshot.num_ooms = 12;
  for (int index = 0; index < mg::kNumMemoryCategories; ++index) {
    snapshot.by_category[index] = {100 + index, 200 + index};
  }
  CHECK(memory::to_json(snapshot) ==
        "{\"device\":\"cuda:1\",\"allocated_bytes\":1,\"reserved_bytes\":2,"
        "\"peak_allocated_bytes\":3,\"peak_reserved_bytes\":4,\"requested_bytes\":5,"
        "\"peak_requested_bytes\":6,\"active_bytes\":7,\"inactive_split_bytes\":8,"
        "\"num_allocations\":9,\"num_segments\":10,\"num_alloc_retries\":11,\"num_ooms\":12,"
        "\"bytes_by_category\":{\"PARAMETER\":100,\"GRADIENT\":101,\"OPTIMIZER_STATE\":102,"
        "\"ACTIVATION\":103,\"INPUT\":104,\"TEMPORARY\":105,\"WORKSPACE\":106,"
        "\"AUTOCAST_CACHE\":107,\"COMMUNICATION\":108},"
        "\"peak_bytes_by_category\":{\"PARAMETER\":200,\"GRADIENT\":201,"
        "\"OPTIMIZER_STATE\":202,\"ACTIVATION\":203,\"INPUT\":204,\"TEMPORARY\":205,"
        "\"WORKSPACE\":206,\"AUTOCAST_CACHE\":207,\"COMMUNICATION\":208}}");
}

TEST_CASE("to_json of a live snapshot carries its category bytes", "[memory]") {
  mg::Tensor batch = mg::empty({256}, {.category = MemoryCategory::Input});
  const memory::Snapshot snapshot = memory::snapshot();
  const std::string json = memory::to_json(snapshot);
  const int64_t input = snapshot.category(MemoryCategory::Input).current;
  CHECK(input >= 1024);
  CHECK(json.find("\"bytes_by_category\":{\"PARAMETER\":") != std::string::npos);
  CHECK(json.find("\"INPUT\":" + std::to_string(input) + ",") != std::string::npos);
  CHECK(json.find("\"device\":\"cpu\"") != std::string::npos);
}

TEST_CASE("report lists every category, the total and the allocator's numbers", "[memory]") {
  mg::Tensor batch = mg::empty({256}, {.category = MemoryCategory::Input});
  const memory::Snapshot snapshot = memory::snapshot();
  const std::string text = memory::report(snapshot);
  for (int index = 0; index < mg::kNumMemoryCategories; ++index) {
    CHECK(text.find(mg::category_name(static_cast<MemoryCategory>(index))) != std::string::npos);
  }
  const int64_t input = snapshot.category(MemoryCategory::Input).current;
  // The INPUT row: readable and exact bytes.
  CHECK(text.find(mg::format_bytes(input)) != std::string::npos);
  CHECK(text.find(" " + std::to_string(input) + " ") != std::string::npos);
  for (const char* label : {"memgrad memory on cpu", "Total", "Allocated", "Reserved",
                            "Segments:", "Alloc retries:", "OOMs:"}) {
    CHECK(text.find(label) != std::string::npos);
  }
  CHECK(memory::report().find("memgrad memory on cpu") != std::string::npos);
}

TEST_CASE("JsonWriter escapes strings", "[memory][json]") {
  mg::JsonWriter json;
  json.value("quote \" backslash \\ newline \n tab \t bell \x07 unit \x1f caf\xc3\xa9");
  CHECK(json.str() ==
        "\"quote \\\" backslash \\\\ newline \\n tab \\t bell \\u0007 unit \\u001f "
        "caf\xc3\xa9\"");
}

TEST_CASE("JsonWriter nests objects and arrays with commas in the right places", "[memory][json]") {
  mg::JsonWriter json;
  json.begin_object();
  json.key("name").value("mnist");
  json.key("losses").begin_array().value(0.5).value(0.25).end_array();
  json.key("epochs").value(3);
  json.key("shuffled").value(true);
  json.key("nested").begin_object().key("empty").begin_array().end_array().end_object();
  json.key("bytes").value(size_t{1} << 40);
  json.key("with \"quote\"").value(int64_t{-7});
  json.end_object();
  CHECK(json.str() ==
        "{\"name\":\"mnist\",\"losses\":[0.5,0.25],\"epochs\":3,\"shuffled\":true,"
        "\"nested\":{\"empty\":[]},\"bytes\":1099511627776,\"with \\\"quote\\\"\":-7}");
}

TEST_CASE("JsonWriter writes doubles that read back exactly, non-finite as null",
          "[memory][json]") {
  mg::JsonWriter json;
  json.begin_array().value(0.1).value(1.0 / 3.0).value(1e300).value(-0.0).value(NAN)
      .value(INFINITY).value(-INFINITY).value(2.5f).null().end_array();
  const std::string text = json.str();
  CHECK(text == "[0.1,0.3333333333333333,1e+300,-0,null,null,null,2.5,null]");
  CHECK(std::stod("0.3333333333333333") == 1.0 / 3.0);
}

TEST_CASE("JsonWriter rejects output that would not be JSON", "[memory][json]") {
  SECTION("a value in an object without a key") {
    mg::JsonWriter json;
    json.begin_object();
    CHECK_THROWS_AS(json.value(1), mg::Error);
  }
  SECTION("a key outside an object") {
    mg::JsonWriter json;
    json.begin_array();
    CHECK_THROWS_AS(json.key("x"), mg::Error);
  }
  SECTION("mismatched closing") {
    mg::JsonWriter json;
    json.begin_object();
    CHECK_THROWS_AS(json.end_array(), mg::Error);
  }
  SECTION("a key left without a value") {
    mg::JsonWriter json;
    json.begin_object().key("x");
    CHECK_THROWS_AS(json.end_object(), mg::Error);
  }
  SECTION("a second top-level value") {
    mg::JsonWriter json;
    json.value(1);
    CHECK_THROWS_AS(json.value(2), mg::Error);
  }
  SECTION("str() before everything is closed") {
    mg::JsonWriter json;
    json.begin_object();
    CHECK_THROWS_WITH(json.str(), Catch::Contains("still open"));
  }
}
