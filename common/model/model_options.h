#pragma once
// Where a model lives and the element type of its activations and large weights.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "common/int4/int4_activations.h"

namespace specd::model {

// The LM head's weights: as the checkpoint stores them (exact), or rounded to 8 bits per row on
// the row's absolute maximum and multiplied on int8 activations with integer dot products (AVX-512
// VNNI, or AVX2) — half the bytes of a bf16 head per step, and far fewer instructions on a verify
// block (kernels/cpu/vnni_gemm.h).
enum class HeadWeights { kStored, kInt8 };

struct ModelOptions {
  c10::Device device = c10::kCPU;
  // Activations and projection weights; float32 on CPU by default, bfloat16 on CUDA. Norm
  // statistics, softmax and the Gated DeltaNet recurrent state are float32 whatever this says.
  c10::ScalarType dtype = c10::kFloat;
  // Training: every weight is read into its own memory (never the mapped file) as a leaf that
  // requires grad, and a W4A16 Linear becomes a FakeQuantLinear on its frozen grid (QAD). The
  // loaded model lists them in parameters().
  bool trainable = false;
  // What W4A16 projections multiply on the CPU: exact float32 activations (the default), bf16 or
  // int8 ones (common/int4/int4_activations.h).
  quant::Int4Activations int4_activations = quant::Int4Activations::kExact;
  // The LM head's (a model that does not train, on a CPU); the input embedding stays as stored.
  HeadWeights head = HeadWeights::kStored;
  // A target's decode steps and verify blocks and a DFlash drafter's blocks as CUDA graphs
  // (step_graphs.h, README.md), in the form a graph replays at later positions: positions read
  // from the device, attention over each cache's whole length under a mask. On a CPU nothing is
  // captured; the forwards take that form.
  bool cuda_graphs = false;
};

}  // namespace specd::model
