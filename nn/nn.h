// nn/nn.h — the nn room's public API: Module, layers, containers, losses and init.
#pragma once

#include "nn/activation.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/sequential.h"
