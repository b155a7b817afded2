// specd quantize: writes a dense Qwen3.5 checkpoint as a compressed-tensors pack-quantized W4A16
// one, by round-to-nearest or by AWQ (scales searched on a calibration text, then RTN).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/specd/commands.h"
#include "common/quantize/awq.h"
#include "common/quantize/quantize_checkpoint.h"

namespace specd::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct QuantizeFlags {
  std::string model;
  std::string out;
  std::string method = "rtn";
  int64_t group_size = 128;
  bool asymmetric = false;
  std::string calib;
  int64_t calib_samples = 128;
  int64_t calib_seq_len = 512;
  std::vector<std::string> ignore = quant::DefaultQuantizeIgnore();
};

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// AWQ's folded weights, which then quantize as RTN would.
absl::StatusOr<quant::WeightOverrides> SearchAwqScales(const QuantizeFlags& flags,
                                                       const quant::RtnOptions& rtn,
                                                       Clock::time_point start) {
  if (flags.calib.empty()) return absl::InvalidArgumentError("--method awq needs --calib FILE");
  absl::StatusOr<std::vector<std::vector<int32_t>>> calibration = quant::ReadCalibrationText(
      flags.calib, flags.model, flags.calib_seq_len, flags.calib_samples);
  if (!calibration.ok()) return calibration.status();
  quant::AwqOptions options;
  options.rtn = rtn;
  absl::StatusOr<quant::AwqResult> awq = quant::ComputeAwqOverrides(
      flags.model, options, *calibration, [&](int64_t done, int64_t total) {
        std::fprintf(stderr, "awq search [%lld/%lld]  %.1f s\n", static_cast<long long>(done),
                     static_cast<long long>(total), SecondsSince(start));
      });
  if (!awq.ok()) return awq.status();
  double rtn_error = 0, awq_error = 0;
  for (const quant::AwqMapping& mapping : awq->mappings) {
    rtn_error += mapping.rtn_error;
    awq_error += mapping.awq_error;
  }
  std::fprintf(
      stderr, "awq: %zu calibration sequences; output error %.3gx RTN's over %zu mappings\n",
      calibration->size(), rtn_error > 0 ? awq_error / rtn_error : 1.0, awq->mappings.size());
  return std::move(awq->overrides);
}

absl::Status Quantize(const QuantizeFlags& flags) {
  if (flags.method == "rtn" && !flags.calib.empty()) {
    return absl::InvalidArgumentError("--calib is for --method awq; RTN needs no data");
  }
  const Clock::time_point start = Clock::now();
  const quant::QuantizeOptions options{
      .rtn = {.group_size = flags.group_size,
              .symmetric = !flags.asymmetric,
              .scale_dtype = io::DType::kBF16},  // unused: scales take each weight's dtype
      .ignore = flags.ignore};
  quant::WeightOverrides overrides;
  if (flags.method == "awq") {
    absl::StatusOr<quant::WeightOverrides> folded = SearchAwqScales(flags, options.rtn, start);
    if (!folded.ok()) return folded.status();
    overrides = *std::move(folded);
  }
  int64_t quantized = 0, total = 0;
  const absl::Status status = quant::QuantizeCheckpoint(
      flags.model, flags.out, options,
      [&](const quant::QuantizeProgress& p) {
        quantized += p.quantized ? 1 : 0;
        total = p.total;
        std::fprintf(stderr, "[%lld/%lld] %s %s  %.1f s\n", static_cast<long long>(p.done),
                     static_cast<long long>(p.total), p.quantized ? "int4" : "copy", p.name.c_str(),
                     SecondsSince(start));
      },
      &overrides);
  if (!status.ok()) return status;
  std::printf("%s: %lld of %lld tensors quantized (W4A16 %s, %s, %s) in %.1f s\n",
              flags.out.c_str(), static_cast<long long>(quantized), static_cast<long long>(total),
              flags.method.c_str(),
              flags.group_size == 0 ? "channel-wise"
                                    : absl::StrFormat("group %d", flags.group_size).c_str(),
              flags.asymmetric ? "asymmetric" : "symmetric", SecondsSince(start));
  return absl::OkStatus();
}

}  // namespace

void AddQuantizeCommand(CLI::App& app) {
  auto flags = std::make_shared<QuantizeFlags>();
  CLI::App* command = app.add_subcommand(
      "quantize", "Write a dense Qwen3.5 checkpoint as compressed-tensors W4A16 (pack-quantized)");
  command->add_option("--model", flags->model, "Dense checkpoint directory")->required();
  command->add_option("--out", flags->out, "Directory to write (created; must be empty)")
      ->required();
  command->add_option("--method", flags->method, "rtn: round to nearest; awq: AWQ scales, then RTN")
      ->capture_default_str()
      ->check(CLI::IsMember({"rtn", "awq"}));
  command->add_option("--group-size", flags->group_size, "Input columns per scale; 0: one per row")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--asymmetric", flags->asymmetric, "Store zero points (W4A16_ASYM)");
  command->add_option("--calib", flags->calib, "AWQ calibration text (UTF-8)");
  command->add_option("--calib-samples", flags->calib_samples, "AWQ: sequences to calibrate on")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--calib-seq-len", flags->calib_seq_len, "AWQ: tokens per sequence")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--ignore", flags->ignore,
                      "Linears to keep dense, a module name or re:PATTERN, repeatable; replaces "
                      "the default list: " +
                          absl::StrJoin(quant::DefaultQuantizeIgnore(), " "));
  command->callback([command, flags] { RunOrExit(*command, [&] { return Quantize(*flags); }); });
}

}  // namespace specd::cli
