// optim/optim.h — the optimizers, in one include.
#pragma once

#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
