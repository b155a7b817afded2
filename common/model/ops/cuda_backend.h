#pragma once
// The kernels/cuda backend of the op table, in builds against a CUDA LibTorch.
#include "common/model/ops/op_table.h"

namespace specd::model::ops {

const Backend& CudaBackend();

}  // namespace specd::model::ops
