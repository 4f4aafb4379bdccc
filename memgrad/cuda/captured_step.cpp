// cuda/captured_step.cpp — warm-up, capture into a private memory pool, replay.
#include "memgrad/cuda/captured_step.h"

#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/error.h"
#include "memgrad/core/graph_capture.h"
#include "memgrad/core/random.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

// A private pool of one device's allocator, given back when the last graph using it goes.
struct PoolLease {
  CachingAllocator& allocator;
  PoolId id;
  explicit PoolLease(CachingAllocator& owner) : allocator(owner), id(owner.create_private_pool()) {}
  ~PoolLease() { allocator.release_pool(id); }
  PoolLease(const PoolLease&) = delete;
  PoolLease& operator=(const PoolLease&) = delete;
};

}  // namespace

struct CapturedStep::Graph {
  Device device;
  // The capture's stream; replays run on it, ordered with the caller's by events. Graphs
  // sharing a pool share it too: the allocator reuses a block only on its own stream.
  std::shared_ptr<Stream> stream;
  std::shared_ptr<PoolLease> pool;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t executable = nullptr;
  std::vector<CapturedDraws> draws;  // the random numbers each replay draws
  int64_t replays = 0;

  explicit Graph(Device on) : device(on) {}
  ~Graph() {
    // NOTE: errors are ignored here: a destructor must not throw, and a failed destroy
    // leaves nothing the caller could repair.
    if (executable != nullptr) (void)cudaGraphExecDestroy(executable);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
  }

  // Makes `waiter` wait, on the device, for the work enqueued so far on `done`.
  static void order_after(const Stream& done, const Stream& waiter) {
    Event mark;
    mark.record(done);
    mark.block(waiter);
  }
};

CapturedStep::CapturedStep(std::function<void()> step, CaptureOptions options) {
  MG_CHECK(step != nullptr, "CapturedStep got an empty step function. Hint: pass the training step as a "
           "lambda, e.g. [&] { optimizer.zero_grad(); loss = ...; loss.backward(); optimizer.step(); }.");
  MG_CHECK(options.device.is_cuda(), "CapturedStep captures CUDA work; got device ", options.device,
           ". Hint: CUDA graphs exist only on CUDA devices; run the step eagerly elsewhere.");
  MG_CHECK(options.warmup_steps >= 1, "CapturedStep needs at least one warm-up step, got ", options.warmup_steps,
           ". Hint: the warm-up creates what a step makes once (optimizer state, cuDNN plans) outside the graph.");
  CachingAllocator& allocator = allocator_for(options.device);
  MG_CHECK(allocator.caching() == CachingAllocator::Caching::On, "CapturedStep on ", options.device,
           " needs the caching allocator, but MG_NO_MEMORY_CACHING is set: without caching, freeing "
           "memory during capture would call cudaFree, which a capture cannot hold. Hint: unset "
           "MG_NO_MEMORY_CACHING.");
  if (options.share_pool_with != nullptr) {
    MG_CHECK(options.share_pool_with->graph_->device == options.device, "CapturedStep on ", options.device,
             " cannot share the private pool of a graph on ", options.share_pool_with->graph_->device, ".");
  }

  DeviceGuard device_guard(options.device);
  graph_ = std::make_unique<Graph>(options.device);
  Graph& g = *graph_;
  const Graph* partner = options.share_pool_with != nullptr ? options.share_pool_with->graph_.get() : nullptr;
  g.stream = partner != nullptr ? partner->stream : std::make_shared<Stream>(options.device);
  g.pool = partner != nullptr ? partner->pool : std::make_shared<PoolLease>(allocator);
  const Stream caller = Stream::current(options.device);
  Graph::order_after(caller, *g.stream);
  std::vector<RandomBase> random_bases;  // the generators the step draws from, for CUDA kernels
  {
    GraphWarmupScope warming_up;
    StreamGuard on_side(*g.stream);
    for (int i = 0; i < options.warmup_steps; ++i) step();
    random_bases = warming_up.random_bases();
  }
  g.stream->synchronize();  // the warm-up's frees are complete; nothing pending enters the capture

  allocator.begin_allocate_to_pool(g.pool->id, g.stream->id());
  MG_CUDA_CHECK(cudaStreamBeginCapture(g.stream->handle(), cudaStreamCaptureModeThreadLocal));
  try {
    GraphCaptureScope capturing(std::move(random_bases));
    StreamGuard on_side(*g.stream);
    step();
    g.draws = capturing.draws();
  } catch (...) {
    // Abandon the capture; its graph, if CUDA made one, is not kept.
    cudaGraph_t abandoned = nullptr;
    (void)cudaStreamEndCapture(g.stream->handle(), &abandoned);
    if (abandoned != nullptr) (void)cudaGraphDestroy(abandoned);
    (void)cudaGetLastError();
    allocator.end_allocate_to_pool(g.pool->id);
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(g.stream->handle(), &g.graph);
  allocator.end_allocate_to_pool(g.pool->id);
  if (ended != cudaSuccess) (void)cudaGetLastError();
  MG_CHECK(ended == cudaSuccess && g.graph != nullptr, "capturing the step as a CUDA graph failed: ",
           cudaGetErrorString(ended), ". Hint: the step must enqueue all its work on the current stream "
           "and must not synchronise with the device or use streams it did not order after the current one.");
  MG_CUDA_CHECK(cudaGraphInstantiate(&g.executable, g.graph, 0));
  Graph::order_after(*g.stream, caller);
}

CapturedStep::~CapturedStep() = default;

void CapturedStep::replay() {
  Graph& g = *graph_;
  DeviceGuard device_guard(g.device);
  const Stream caller = Stream::current(g.device);
  Graph::order_after(caller, *g.stream);
  {
    StreamGuard on_graph_stream(*g.stream);
    for (const CapturedDraws& drawn : g.draws) {
      write_philox_base(drawn.base_on_device, drawn.generator->reserve(static_cast<int64_t>(drawn.blocks), g.device));
    }
  }
  MG_CUDA_CHECK(cudaGraphLaunch(g.executable, g.stream->handle()));
  Graph::order_after(*g.stream, caller);
  ++g.replays;
}

size_t CapturedStep::pool_bytes() const { return graph_->pool->allocator.pool_reserved_bytes(graph_->pool->id); }

int64_t CapturedStep::replays() const { return graph_->replays; }

}  // namespace mg::cuda
