// optim/lambda_lr.cpp — LambdaLR: the base lr times the user's factor for the epoch.
#include "memgrad/optim/lambda_lr.h"

#include <cmath>

#include "memgrad/core/error.h"

namespace mg::optim {

LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lambda) : LambdaLR(optimizer, std::vector<Lambda>{std::move(lambda)}) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lambdas)
    : LRScheduler(optimizer), lambdas_(std::move(lambdas)), cursor_(optimizer.param_groups().size()) {
  const size_t groups = optimizer.param_groups().size();
  MG_CHECK(lambdas_.size() == 1 || lambdas_.size() == groups, "LambdaLR: expected one lambda or one per ",
           "parameter group (", groups, "), got ", lambdas_.size(), ".");
  for (size_t g = 0; g < lambdas_.size(); ++g) {
    MG_CHECK(lambdas_[g] != nullptr, "LambdaLR: lambda ", g, " is empty. Hint: pass a function of the epoch, ",
             "such as [](int64_t epoch) { return std::pow(0.95, epoch); }.");
  }
  step();  // epoch 0
}

double LambdaLR::lr_at(int64_t epoch, double base_lr) const {
  const size_t group = cursor_.next();
  const Lambda& lambda = lambdas_.size() == 1 ? lambdas_.front() : lambdas_[group];
  double factor = 0;
  try {
    factor = lambda(epoch);
    MG_CHECK(std::isfinite(factor) && factor >= 0, "LambdaLR: the lambda of parameter group ", group,
             " returned ", factor, " at epoch ", epoch, "; the factor multiplying the base lr ", base_lr,
             " must be finite and >= 0.");
  } catch (...) {
    cursor_.reset();  // the step is abandoned: a retry asks about group 0 first
    throw;
  }
  return base_lr * factor;
}

}  // namespace mg::optim
