// docs/guide/04_checkpoints.cpp — saving a run and resuming it, starting a new run from a
// checkpoint's weights, and loading weights that PyTorch saved (docs/guide.md, "Saving and
// resuming"). Fails (exit 1) unless a run stopped after one epoch and resumed ends with
// exactly the weights of a run that never stopped, a new run started from the checkpoint
// begins with its weights, and a state_dict file in safetensors.torch.save_file's format
// loads into a Net that then computes what the saved one did.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <memgrad/io/safetensors.h>
#include <memgrad/memgrad.h>

#include "checks.h"
#include "data.h"
#include "device.h"
#include "net.h"
#include "training.h"

namespace {

// One run of a training program that saves after every epoch: starts afresh or resumes from
// the checkpoint the last run saved, and trains until `until_epoch` epochs are done.
std::shared_ptr<Net> run(mg::Device device, int until_epoch, bool resume) {
  mg::manual_seed(0);
  Data data(device);
  auto model = std::make_shared<Net>();
  model->to(device);
  mg::optim::Adam optimizer(model->parameters(), {.lr = 1e-3});
  mg::optim::CosineAnnealingLR scheduler(optimizer, /*t_max=*/2);  // stepped once per epoch
  // [guide: resume]
  int start_epoch = 0;
  if (resume) {  // into a model, optimizer and scheduler built as before
    const mg::Checkpoint checkpoint = mg::load_checkpoint(
        "guide_checkpoint.safetensors", {.model = model.get(), .optimizer = &optimizer, .scheduler = &scheduler});
    start_epoch = static_cast<int>(checkpoint.epoch);
    data.train_loader.set_epoch(start_epoch);  // its next loop shuffles as that epoch did
  }
  // [guide: end]
  for (int epoch = start_epoch; epoch < until_epoch; ++epoch) {
    const double loss = train_epoch(*model, optimizer, data.train_loader);
    scheduler.step();
    std::printf("  epoch %d: training loss %.6f\n", epoch + 1, loss);
    // [guide: save]
    mg::save_checkpoint("guide_checkpoint.safetensors",
                        {.model = model.get(), .optimizer = &optimizer, .scheduler = &scheduler,
                         .epoch = epoch + 1, .metadata = {{"loss", std::to_string(loss)}}});
    // [guide: end]
  }
  return model;
}

}  // namespace

int main() {
  const mg::Device device = pick_device();
  std::printf("a run stopped after epoch 1:\n");
  run(device, 1, /*resume=*/false);
  std::printf("resumed:\n");
  const std::shared_ptr<Net> resumed = run(device, 2, /*resume=*/true);
  std::printf("a run that never stopped:\n");
  const std::shared_ptr<Net> straight = run(device, 2, /*resume=*/false);
  const double resume_difference = max_difference(resumed->parameters(), straight->parameters());
  std::printf("largest difference between the resumed and the uninterrupted weights: %g\n", resume_difference);

  // [guide: init-from]
  auto fine_tuned = std::make_shared<Net>();  // a new run: its own optimizer, schedule and step 0
  fine_tuned->to(device);
  mg::load_checkpoint("guide_checkpoint.safetensors", {.model = fine_tuned.get(), .default_generator = false});
  // [guide: end]
  const double init_difference = max_difference(fine_tuned->parameters(), straight->parameters());
  std::printf("largest difference between the new run's first weights and the checkpoint's: %g\n", init_difference);

  // What safetensors.torch.save_file(net.state_dict(), path) writes: the tensors under their
  // state_dict names, no metadata. (PyTorch is not needed here: the trained Net stands in.)
  mg::save_safetensors("net_from_torch.safetensors", straight->state_dict());

  // [guide: from-pytorch]
  auto from_torch = std::make_shared<Net>();
  mg::nn::load(*from_torch, "net_from_torch.safetensors");  // strict: every name and shape must match
  from_torch->to(device);
  // [guide: end]

  // A file that does not fit the model is refused with the reason, and changes nothing.
  try {
    Net narrower(NetOptions{.hidden = 64});
    mg::nn::load(narrower, "net_from_torch.safetensors");
  } catch (const mg::Error& error) {
    std::printf("loading into a Net with hidden = 64: %s\n", error.what());
  }

  Data data(device);
  mg::data::Batch batch;
  data.test_loader.next(batch);
  mg::NoGradGuard no_grad;
  straight->eval();
  from_torch->eval();
  const double logits_difference =
      ((*from_torch)(batch.inputs) - (*straight)(batch.inputs)).abs().max().item();
  std::printf("largest difference between the logits of the loaded and the saved model: %g\n", logits_difference);

  if (resume_difference != 0 || init_difference != 0 || logits_difference != 0) {
    std::fprintf(stderr, "FAILED: expected the resumed run to end with the uninterrupted run's weights, the new "
                 "run to start from the checkpoint's, and the loaded model to compute the saved one's logits, "
                 "exactly\n");
    return 1;
  }
  return 0;
}
