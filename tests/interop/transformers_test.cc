// specd's checkpoints and transformers', both ways, with the libraries users load them with
// (torch, transformers, compressed-tensors: scripts/python-requirements.txt, installed by
// scripts/setup.sh into .cache/python): models transformers builds and saves run in specd with
// transformers' logits, and W4A16 checkpoints `specd quantize` writes load in transformers with
// specd's logits. The scripts say what they build and their tolerances.
#include <gtest/gtest.h>

#include "tests/interop/python_peers.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace specd {
namespace {

using ::specd::testing::ProcessResult;
using ::specd::testing::RunPeerScript;

TEST(TransformersInteropTest, SpecdComputesWhatTransformersDoesOnModelsItSaved) {
  const ::specd::testing::TempDir work;
  const ProcessResult checked =
      RunPeerScript("transformers_parity.py", {SPECD_BINARY, work.path().string()});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_EQ(checked.out,
            "the fixture's shape, tied head: specd's logits and hidden states are transformers'\n"
            "odd shapes, untied head: specd's logits and hidden states are transformers'\n"
            "odd shapes, tied head, multimodal layout: specd's logits and hidden states are "
            "transformers'\n"
            "the fixture's shape in bf16: specd's logits and hidden states are transformers'\n");
}

TEST(TransformersInteropTest, CheckpointsSpecdQuantizesLoadInTransformersWithCompressedTensors) {
  const ::specd::testing::TempDir work;
  const ProcessResult checked =
      RunPeerScript("compressed_tensors_parity.py", {SPECD_BINARY, work.path().string()});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_EQ(
      checked.out,
      "symmetric, groups of 16: specd quantize writes it\n"
      "symmetric, groups of 16: transformers loads it and gives specd's logits\n"
      "asymmetric, groups of 16: specd quantize writes it\n"
      "asymmetric, groups of 16: transformers loads it and gives specd's logits\n"
      "symmetric, one scale per row, multimodal layout: specd quantize writes it\n"
      "symmetric, one scale per row, multimodal layout: transformers loads it and gives "
      "specd's logits\n"
      "asymmetric, groups of 32, from bf16: specd quantize writes it\n"
      "asymmetric, groups of 32, from bf16: transformers loads it and gives specd's logits\n");
}

}  // namespace
}  // namespace specd
