// optim/optim.h — the optimizers, schedulers and gradient clipping, in one include.
#pragma once

#include "memgrad/optim/adagrad.h"
#include "memgrad/optim/adam.h"
#include "memgrad/optim/adam_8bit.h"
#include "memgrad/optim/clip_grad.h"
#include "memgrad/optim/lambda_lr.h"
#include "memgrad/optim/offloaded_adam.h"
#include "memgrad/optim/optimizer.h"
#include "memgrad/optim/param_groups.h"
#include "memgrad/optim/reduce_lr_on_plateau.h"
#include "memgrad/optim/scheduler.h"
#include "memgrad/optim/sgd.h"
#include "memgrad/optim/state_dict.h"
