// optim/lambda_lr.cpp — LambdaLR: the base lr times the user's factor for the epoch.
#include "memgrad/optim/lambda_lr.h"

#include <cmath>

#include "memgrad/core/error.h"

namespace mg::optim {

LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lambda) : LambdaLR(optimizer, std::vector<Lambda>{std::move(lambda)}) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lambdas)
    : LRScheduler(optimizer), lambdas_(std::move(lambdas)) {
  const size_t groups = optimizer.param_groups().size();
  MG_CHECK(lambdas_.size() == 1 || lambdas_.size() == groups, "LambdaLR: expected one lambda or one per ",
           "parameter group (", groups, "), got ", lambdas_.size(), ".");
  for (size_t g = 0; g < lambdas_.size(); ++g) {
    MG_CHECK(lambdas_[g] != nullptr, "LambdaLR: lambda ", g, " is empty. Hint: pass a function of the epoch, ",
             "such as [](int64_t epoch) { return std::pow(0.95, epoch); }.");
  }
  step();  // epoch 0
}

double LambdaLR::lr_at(int64_t epoch, size_t group, double base_lr) const {
  const Lambda& lambda = lambdas_.size() == 1 ? lambdas_.front() : lambdas_[group];
  const double factor = lambda(epoch);
  MG_CHECK(std::isfinite(factor) && factor >= 0, "LambdaLR: the lambda of parameter group ", group, " returned ",
           factor, " at epoch ", epoch, "; the factor multiplying the base lr ", base_lr,
           " must be finite and >= 0.");
  return base_lr * factor;
}

}  // namespace mg::optim
