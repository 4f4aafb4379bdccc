// nn/nn.h — the nn room's public API: Module, layers, containers, losses and init.
#pragma once

#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/checkpoint_sequential.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/mnist_cnn.h"
#include "nn/module.h"
#include "nn/pooling.h"
#include "nn/resnet.h"
#include "nn/sequential.h"
