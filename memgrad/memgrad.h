// memgrad.h — the umbrella header: everything a user of memgrad needs, room by room.
// (CUDA specifics a CPU program never needs, streams and events, are in memgrad/cuda/,
// which a CUDA build installs without its internal headers.)
#pragma once

// core: tensors, devices, the caching allocator, random numbers
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/determinism.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/print.h"
#include "memgrad/core/random.h"
#include "memgrad/core/tensor.h"
#include "memgrad/core/tensor_index.h"

// cuda: is there a GPU (in every build), waiting for it, TF32, early launches, steps captured as CUDA graphs
#include "memgrad/cuda/captured_step.h"
#include "memgrad/cuda/cuda.h"

// io: checkpoints in safetensors, JSON
#include "memgrad/io/json.h"
#include "memgrad/io/safetensors.h"

// memory: where the bytes go, when, and how many a run will need
#include "memgrad/memory/context.h"
#include "memgrad/memory/memory_cap.h"
#include "memgrad/memory/recorder.h"
#include "memgrad/memory/simulated_target.h"
#include "memgrad/memory/snapshot.h"

// autocast and autograd: mixed precision, the graph and the differentiable ops
#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/anomaly_mode.h"
#include "memgrad/autograd/attention.h"
#include "memgrad/autograd/autocast_operands.h"
#include "memgrad/autograd/checkpoint.h"
#include "memgrad/autograd/checkpoint_policy.h"
#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/dropout.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/embedding.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/indexing.h"
#include "memgrad/autograd/layer_norm.h"
#include "memgrad/autograd/linear_cross_entropy.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/masked_fill.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/mlp.h"
#include "memgrad/autograd/norm.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/save_on_cpu.h"
#include "memgrad/autograd/saved_tensor_hooks.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/autograd/side_stream.h"
#include "memgrad/autograd/softmax.h"
#include "memgrad/autograd/split.h"
#include "memgrad/autograd/topk.h"
#include "memgrad/autograd/unary.h"

// nn, optim, amp: modules, optimizers and schedulers, the GradScaler
#include "memgrad/amp/grad_scaler.h"
#include "memgrad/nn/nn.h"
#include "memgrad/optim/optim.h"

// data: datasets and the DataLoader
#include "memgrad/data/batch.h"
#include "memgrad/data/dataloader.h"
#include "memgrad/data/dataset.h"
#include "memgrad/data/mnist_dataset.h"
#include "memgrad/data/tensor_dataset.h"
#include "memgrad/data/transforms.h"

// training: a whole training state saved and restored in one call
#include "memgrad/training/checkpoint.h"

// distributed: process groups (MPI on CPU tensors) and the distributed sampler
#include "memgrad/distributed/distributed_data_parallel.h"
#include "memgrad/distributed/distributed_sampler.h"
#include "memgrad/distributed/init_process_group.h"
#include "memgrad/distributed/process_group.h"
#include "memgrad/distributed/single_process_group.h"
#include "memgrad/distributed/zero_redundancy_optimizer.h"
