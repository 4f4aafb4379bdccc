// examples/common/deterministic.h — the examples' --deterministic: the run under
// mg::set_deterministic_algorithms(true) (core/determinism.h), so that two runs with the
// same seeds on the same GPU and library versions give the same losses and weights, bit
// for bit (on the CPU they do without it). What it changes and costs: docs/reliability.md.
#pragma once

#include <string>

namespace examples {

// The flag's lines for a usage text.
std::string deterministic_usage();

}  // namespace examples
