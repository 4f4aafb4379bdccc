// tests/cuda/test_cuda_side_stream.cpp — convolutions' weight gradients on the backward's
// side stream (autograd/side_stream.h) give the single stream's results bit for bit, at the
// same peak of requested memory: ResNet-18 steps under float16 autocast in channels_last;
// float32 convolutions whose weight gradients meet the main stream again (a weight used
// twice, a weight through an op that saves tensors, gradients accumulated over two
// backward calls, a hook on the weight); and a CapturedStep, whose capture keeps to one
// stream. Each run also checks whether the side stream was used, and one test sees the
// side stream's work finish while the main stream is held.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/anomaly_mode.h"
#include "memgrad/autograd/conv.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/side_stream.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/cuda/captured_step.h"
#include "memgrad/cuda/cuda.h"
#include "memgrad/cuda/runtime.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/nn/nn.h"
#include "memgrad/optim/optim.h"
#include "cuda/deterministic_convolutions.h"
#include "cuda/kernel_checks.h"
#include "cuda/resnet18_steps.h"
#include "cuda/stream_hold.h"

using namespace mg;
using namespace cuda_checks;
using mg_test::check_same;

namespace {

// Sets autograd::set_weight_gradients_on_side_stream for a scope, and counts the work the
// side stream got meanwhile.
class WeightGradientsOnSideStream {
 public:
  explicit WeightGradientsOnSideStream(bool on)
      : before_(autograd::weight_gradients_on_side_stream()), runs_before_(autograd::side_stream_runs()) {
    autograd::set_weight_gradients_on_side_stream(on);
  }
  ~WeightGradientsOnSideStream() { autograd::set_weight_gradients_on_side_stream(before_); }
  WeightGradientsOnSideStream(const WeightGradientsOnSideStream&) = delete;
  WeightGradientsOnSideStream& operator=(const WeightGradientsOnSideStream&) = delete;

  uint64_t runs() const { return autograd::side_stream_runs() - runs_before_; }

 private:
  bool before_;
  uint64_t runs_before_;
};

struct Run {
  std::vector<Tensor> state;     // what the run leaves: parameters, buffers, gradients, loss
  uint64_t side_stream_runs = 0;
  int64_t peak_requested = 0;    // bytes the tensors asked for, from the run's start
};

// mg_test::trained_resnet18(steps) with the switch set, and what it left and used.
Run trained_resnet18(bool side_stream, int steps) {
  cuda::synchronize();
  memory::reset_peak_stats(kCuda);
  const int64_t requested_before = memory::snapshot(kCuda).requested_bytes;
  Run run;
  {
    WeightGradientsOnSideStream switched(side_stream);
    run.state = mg_test::trained_resnet18(steps);
    run.side_stream_runs = switched.runs();
  }
  run.peak_requested = memory::snapshot(kCuda).peak_requested_bytes - requested_before;
  return run;
}

// Float32 NCHW convolutions where weight gradients made on the side stream meet the main
// stream's work: `shared` feeds two convolutions (its gradient is a sum), `scaled` reaches
// its convolution through a multiplication by a tensor that needs a gradient too (a node
// that saves tensors), `hooked` has a hook that doubles its gradient (so its
// accumulation runs on the main stream), and `plain` goes straight to its .grad. Two
// backward calls accumulate into the gradients.
Run convolutions_meeting_the_main_stream(bool side_stream) {
  Generator generator(22);
  const auto parameter = [&](const Shape& shape) { return (randn(shape, {}, &generator) * 0.2).to(kCuda).requires_grad_(); };
  const Tensor shared = parameter({8, 8, 3, 3}), scaled = parameter({8, 8, 3, 3}), hooked = parameter({8, 8, 1, 1}),
               plain = parameter({4, 8, 3, 3}), scale = parameter({8, 1, 1, 1});
  hooked.register_hook([](const Tensor& grad) { return grad * 2.0; });
  Conv2dOptions same;
  same.padding = {1, 1};
  Run run;
  {
    WeightGradientsOnSideStream switched(side_stream);
    for (int call = 0; call < 2; ++call) {
      const Tensor x = randn({6, 8, 20, 20}, {}, &generator).to(kCuda);
      Tensor y = relu(conv2d(x, shared, Tensor(), same));
      y = relu(conv2d(y, shared, Tensor(), same));
      y = relu(conv2d(y, mul(scaled, scale), Tensor(), same));
      y = relu(conv2d(y, hooked, Tensor(), Conv2dOptions{}));
      y = conv2d(y, plain, Tensor(), same);
      (y * y).mean().backward();
    }
    run.side_stream_runs = switched.runs();
  }
  run.state = {shared.grad(), scaled.grad(), hooked.grad(), plain.grad(), scale.grad()};
  return run;
}

}  // namespace

TEST_CASE("Weight gradients on a side stream give the single stream's ResNet-18 steps bit for bit, at the same peak",
          "[cuda]") {
  mg_test::DeterministicConvolutions deterministic;
  const Run one_stream = trained_resnet18(false, 3);  // also makes what the process makes once
  CHECK(one_stream.side_stream_runs == 0);
  const Run again = trained_resnet18(false, 3);
  check_same(again.state, one_stream.state, "two runs on one stream");  // the comparison is exact
  const Run side = trained_resnet18(true, 3);
  // Each step: 20 weight gradients, and the nodes that carry them to .grad.
  CHECK(side.side_stream_runs >= 3 * 20);
  check_same(side.state, one_stream.state, "weight gradients on the side stream against one stream");
  // The peak comes as backward starts, before the side stream holds anything.
  CHECK(side.peak_requested == again.peak_requested);
  // As recommended (set_weight_gradients_on_side_stream): the main stream at the highest
  // priority, which changes where the device places kernels, not what they compute.
  const cuda::Stream high(kCuda, cuda::StreamPriority::High);
  {
    const cuda::StreamGuard on_high(high);
    // A stream's first steps make what a stream gets once (its cuBLAS workspace: 32 MiB).
    (void)trained_resnet18(true, 1);
    const Run side_beside_high = trained_resnet18(true, 3);
    CHECK(side_beside_high.side_stream_runs == side.side_stream_runs);
    check_same(side_beside_high.state, one_stream.state, "the side stream beside a high-priority main stream");
    CHECK(side_beside_high.peak_requested == again.peak_requested);
  }
  high.synchronize();
}

TEST_CASE("Weight gradients on a side stream: sums, saving nodes, hooks and accumulation join the main stream "
          "correctly", "[cuda]") {
  mg_test::DeterministicConvolutions deterministic;
  const Run one_stream = convolutions_meeting_the_main_stream(false);
  const Run side = convolutions_meeting_the_main_stream(true);
  CHECK(one_stream.side_stream_runs == 0);
  CHECK(side.side_stream_runs >= 2 * 5);
  check_same(side.state, one_stream.state, "side stream against one stream");
}

TEST_CASE("Weight gradients on a side stream: not used under anomaly mode or on the CPU", "[cuda]") {
  {
    autograd::DetectAnomalyGuard anomaly(true);
    CHECK(convolutions_meeting_the_main_stream(true).side_stream_runs == 0);
  }
  WeightGradientsOnSideStream switched(true);
  const Tensor weight = randn({4, 3, 3, 3}).requires_grad_();
  conv2d(randn({2, 3, 8, 8}), weight, Tensor(), Conv2dOptions{}).sum().backward();
  CHECK(weight.grad().defined());
  CHECK(switched.runs() == 0);
}

TEST_CASE("Weight gradients on a side stream: a CapturedStep's warm-up uses it, its capture keeps to one stream, "
          "and replays equal eager steps", "[cuda][graph]") {
  mg_test::DeterministicConvolutions deterministic;
  const auto make = [] {
    Generator generator(23);
    auto model = std::make_shared<nn::Sequential>(
        std::make_shared<nn::Conv2d>(3, 16, 3, Conv2dOptions{.padding = {1, 1}}, /*has_bias=*/false, &generator),
        std::make_shared<nn::BatchNorm2d>(16), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Conv2d>(16, 16, 3, Conv2dOptions{.padding = {1, 1}}, /*has_bias=*/false, &generator),
        std::make_shared<nn::BatchNorm2d>(16), std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(16 * 8 * 8, 10, true, &generator));
    model->to(kCuda);
    model->to(MemoryFormat::ChannelsLast);
    return model;
  };
  Generator data(24);
  const Tensor input = randn({16, 3, 8, 8}, {}, &data).to(kCuda).contiguous(MemoryFormat::ChannelsLast);
  const Tensor target = randint(0, 10, {16}, {.dtype = DType::Int64}, &data).to(kCuda);
  const auto train = [&](const std::shared_ptr<nn::Sequential>& model, optim::SGD& optimizer) {
    optimizer.zero_grad();
    {
      amp::AutocastGuard mixed(DType::Float16);
      cross_entropy((*model)(input), target).backward();
    }
    optimizer.step();
  };
  constexpr int kWarmup = 3, kReplays = 4;
  const auto eager_model = make();
  optim::SGD eager_optimizer(eager_model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  for (int i = 0; i < kWarmup + kReplays; ++i) train(eager_model, eager_optimizer);

  const auto captured_model = make();
  optim::SGD captured_optimizer(captured_model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  WeightGradientsOnSideStream switched(true);
  cuda::CapturedStep step([&] { train(captured_model, captured_optimizer); }, {.warmup_steps = kWarmup});
  const uint64_t warmup_runs = switched.runs();
  CHECK(warmup_runs >= kWarmup * 2);
  for (int i = 0; i < kReplays; ++i) step.replay();
  CHECK(switched.runs() == warmup_runs);  // the capture added none
  std::vector<Tensor> eager_state = eager_model->parameters(), captured_state = captured_model->parameters();
  for (const Tensor& buffer : eager_model->buffers()) eager_state.push_back(buffer);
  for (const Tensor& buffer : captured_model->buffers()) captured_state.push_back(buffer);
  check_same(captured_state, eager_state, "replays with the side stream on against eager steps without it");
}

TEST_CASE("Weight gradients on a side stream: the work finishes while the main stream is held", "[cuda]") {
  // A node whose backward marks the main stream, then holds it, then hands its work to the
  // side stream: the work must finish before the hold is released. On the main stream it
  // would wait behind the hold. While the hold lasts the host only asks an event whether
  // the work is done, and launches only kernels it has launched before: loading a kernel
  // on its first launch (CUDA's lazy loading) may wait for every stream, the held one too.
  WeightGradientsOnSideStream switched(true);
  const Tensor x = zeros({4096}, {.device = kCuda}).requires_grad_();
  Tensor output = x.detach().clone();
  cuda::Event work_done;
  work_done.record(cuda::Stream::current(kCuda));  // created now, not while the hold lasts
  cudaStream_t work_stream = nullptr;
  bool finished_while_held = false, hold_timed_out = true;
  autograd::record("HeldMainStreamBackward", output, {x}, autograd::saved(),
                   [&](const autograd::Node&, const Tensor& grad) {
                     const Tensor made = zeros_like(grad);
                     made.copy_(grad).mul_(3.0).zero_();  // the work's kernels, loaded now
                     autograd::SideStreamWork work(grad.device(), /*use=*/true);
                     mg_test::StreamHold hold(cuda::Stream::current(kCuda));
                     work.run(0, {grad}, [&] {
                       made.copy_(grad).mul_(3.0);  // in place: nothing to allocate
                       work_stream = cuda::current_stream(kCuda);
                       work_done.record(cuda::Stream::current(kCuda));
                     });
                     for (int attempt = 0; attempt < 500 && !finished_while_held; ++attempt) {
                       finished_while_held = work_done.query();
                       if (!finished_while_held) std::this_thread::sleep_for(std::chrono::milliseconds(10));
                     }
                     hold_timed_out = hold.timed_out();
                     hold.release();
                     return std::vector<Tensor>{made};
                   });
  output.backward(ones({4096}, {.device = kCuda}));
  CHECK(work_stream != cuda::Stream::default_stream(kCuda).handle());
  CHECK(finished_while_held);
  CHECK_FALSE(hold_timed_out);
  CHECK(switched.runs() >= 1);
  CHECK(host_values(x.grad()) == std::vector<double>(4096, 3.0));
}
