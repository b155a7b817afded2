#pragma once
// Sees the input of every Linear that runs on this thread while it lives, with the Linear's
// module name: what calibration (AWQ scale search, GPTQ Hessians) needs of a model, as a
// PyTorch forward pre-hook gives it. Taps nest; the innermost one sees the inputs.
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>

namespace specd::model {

class LinearInputTap {
 public:
  using Observer = std::function<void(const std::string& module, const at::Tensor& input)>;

  explicit LinearInputTap(Observer observer);
  ~LinearInputTap();
  LinearInputTap(const LinearInputTap&) = delete;
  LinearInputTap& operator=(const LinearInputTap&) = delete;

  // Called by Linear::Forward: hands the input to this thread's innermost tap, if any.
  static void Observe(const std::string& module, const at::Tensor& input);

 private:
  Observer observer_;
  LinearInputTap* outer_;
};

}  // namespace specd::model
