// optim/optim.h — the optimizers, schedulers and gradient clipping, in one include.
#pragma once

#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "optim/param_groups.h"
#include "optim/scheduler.h"
#include "optim/sgd.h"
#include "optim/state_dict.h"
