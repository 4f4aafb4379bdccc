// examples/resnet/bench.h — `resnet --bench`: the training step's speed and peak memory on
// synthetic data.
#pragma once

#include "examples/resnet/args.h"

namespace resnet {

int run_bench(const Args& args);

}  // namespace resnet
