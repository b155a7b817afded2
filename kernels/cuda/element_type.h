#pragma once
// The element types kernels/cuda's elementwise kernels read and write.
namespace specd::kernels::cuda {

enum class ElementType { kFloat32, kBfloat16 };

}  // namespace specd::kernels::cuda
