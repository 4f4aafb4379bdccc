// examples/memory_lab/report.h — how results are shown: a block per experiment, a final
// table, and the JSON file.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <memgrad/core/device.h>
#include "examples/memory_lab/experiment.h"

namespace memory_lab {

using Outcome = std::pair<const Experiment*, Result>;

// The claim, every measurement (with the expected arithmetic beside it) and the verdict.
std::string format_block(const Experiment& experiment, const Result& result);
// One row per experiment: name, verdict, why.
std::string format_table(const std::vector<Outcome>& outcomes);
// {"device":..., "experiments":{name:{"claim","verdict","why","measured":{name:value}}}};
// bytes as integers, ratios and milliseconds as numbers.
std::string to_json(mg::Device device, const std::vector<Outcome>& outcomes);

}  // namespace memory_lab
