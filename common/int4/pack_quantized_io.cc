#include "common/int4/pack_quantized_io.h"

#include <cstring>
#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/int4/float_encoding.h"

namespace specd::quant {
namespace {

std::string ShapeString(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status ShapeError(const io::TensorView& tensor, const std::vector<int64_t>& expected,
                        std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(tensor.name, ": shape ", ShapeString(tensor.shape),
                                                 ", expected ", ShapeString(expected), " (",
                                                 absl::string_view(why.data(), why.size()), ")"));
}

absl::Status ExpectDType(const io::TensorView& tensor, std::initializer_list<io::DType> allowed) {
  for (io::DType dtype : allowed) {
    if (tensor.dtype == dtype) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(tensor.name, ": unexpected dtype ", io::DTypeName(tensor.dtype)));
}

// int32 or int64 elements widened to int64.
std::vector<int64_t> ReadIntegers(const io::TensorView& tensor) {
  std::vector<int64_t> values(tensor.NumElements());
  for (size_t i = 0; i < values.size(); ++i) {
    if (tensor.dtype == io::DType::kI64) {
      std::memcpy(&values[i], tensor.bytes.data() + 8 * i, 8);
    } else {
      int32_t value;
      std::memcpy(&value, tensor.bytes.data() + 4 * i, 4);
      values[i] = value;
    }
  }
  return values;
}

template <typename T>
std::vector<std::byte> ToBytes(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Zero points [rows, groups] as compressed-tensors packs them: int32 [ceil(rows/8), groups].
std::vector<int32_t> PackZeroPoints(const Int4Grid& grid) {
  const int64_t groups = grid.groups();
  std::vector<int32_t> packed(Int4WordCount(grid.rows) * groups, 0);
  for (int64_t row = 0; row < grid.rows; ++row) {
    for (int64_t g = 0; g < groups; ++g) {
      const uint32_t nibble =
          static_cast<uint32_t>(grid.zero_points[row * groups + g] + kInt4NibbleOffset);
      int32_t& word = packed[(row / kInt4PerWord) * groups + g];
      word =
          static_cast<int32_t>(static_cast<uint32_t>(word) | nibble << (4 * (row % kInt4PerWord)));
    }
  }
  return packed;
}

std::vector<int8_t> UnpackZeroPoints(std::span<const int64_t> words, int64_t rows, int64_t groups) {
  std::vector<int8_t> zero_points(rows * groups);
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t g = 0; g < groups; ++g) {
      const uint32_t word = static_cast<uint32_t>(words[(row / kInt4PerWord) * groups + g]);
      const int nibble = static_cast<int>((word >> (4 * (row % kInt4PerWord))) & 0xF);
      zero_points[row * groups + g] = static_cast<int8_t>(nibble - kInt4NibbleOffset);
    }
  }
  return zero_points;
}

}  // namespace

io::TensorView OwnedTensor::View() const {
  return io::TensorView{
      .name = name, .dtype = dtype, .shape = shape, .bytes = data, .owner = nullptr};
}

absl::StatusOr<PackedInt4Weight> LoadPackedInt4Weight(const io::Checkpoint& checkpoint,
                                                      std::string_view linear_name) {
  const std::string prefix(linear_name);
  absl::StatusOr<const io::TensorView*> shape_tensor = checkpoint.Get(prefix + ".weight_shape");
  if (!shape_tensor.ok()) return shape_tensor.status();
  absl::StatusOr<const io::TensorView*> packed = checkpoint.Get(prefix + ".weight_packed");
  if (!packed.ok()) return packed.status();
  absl::StatusOr<const io::TensorView*> scale = checkpoint.Get(prefix + ".weight_scale");
  if (!scale.ok()) return scale.status();
  const io::TensorView* zero_point = checkpoint.Find(prefix + ".weight_zero_point");
  const io::TensorView* g_idx = checkpoint.Find(prefix + ".weight_g_idx");

  if (absl::Status s = ExpectDType(**shape_tensor, {io::DType::kI64, io::DType::kI32}); !s.ok()) {
    return s;
  }
  if ((*shape_tensor)->shape != std::vector<int64_t>{2}) {
    return ShapeError(**shape_tensor, {2}, "[N, K]");
  }
  const std::vector<int64_t> rows_cols = ReadIntegers(**shape_tensor);
  Int4Grid grid;
  grid.rows = rows_cols[0];
  grid.cols = rows_cols[1];
  if (grid.rows <= 0 || grid.cols <= 0) {
    return absl::InvalidArgumentError(absl::StrCat((*shape_tensor)->name, ": weight shape ",
                                                   ShapeString(rows_cols), " is empty"));
  }

  if (absl::Status s = ExpectDType(**packed, {io::DType::kI32}); !s.ok()) return s;
  const std::vector<int64_t> packed_shape = {grid.rows, Int4WordCount(grid.cols)};
  if ((*packed)->shape != packed_shape) {
    return ShapeError(**packed, packed_shape, "[N, ceil(K/8)] for weight_shape [N, K]");
  }

  if ((*scale)->shape.size() != 2 || (*scale)->shape[0] != grid.rows || (*scale)->shape[1] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat((*scale)->name, ": shape ",
                                                   ShapeString((*scale)->shape), ", expected [",
                                                   grid.rows, ", K/G] (one scale per group)"));
  }
  if (grid.cols % (*scale)->shape[1] != 0) {
    return absl::InvalidArgumentError(absl::StrCat((*scale)->name, ": ", (*scale)->shape[1],
                                                   " groups do not divide K = ", grid.cols,
                                                   " into equal groups"));
  }
  absl::StatusOr<std::vector<float>> scales = DecodeFloats(**scale);
  if (!scales.ok()) return scales.status();
  grid.group_size = grid.cols / (*scale)->shape[1];
  grid.scales = *std::move(scales);
  grid.scale_dtype = (*scale)->dtype;

  if (zero_point != nullptr) {
    if (absl::Status s = ExpectDType(*zero_point, {io::DType::kI32}); !s.ok()) return s;
    const std::vector<int64_t> zero_shape = {Int4WordCount(grid.rows), grid.groups()};
    if (zero_point->shape != zero_shape) {
      return ShapeError(*zero_point, zero_shape, "[ceil(N/8), K/G], packed along N");
    }
    grid.zero_points = UnpackZeroPoints(ReadIntegers(*zero_point), grid.rows, grid.groups());
  }
  if (g_idx != nullptr) {
    if (absl::Status s = ExpectDType(*g_idx, {io::DType::kI32, io::DType::kI64}); !s.ok()) return s;
    if (g_idx->shape != std::vector<int64_t>{grid.cols}) {
      return ShapeError(*g_idx, {grid.cols}, "one group per input column");
    }
    for (int64_t group : ReadIntegers(*g_idx))
      grid.group_index.push_back(static_cast<int32_t>(group));
  }
  if (absl::Status valid = ValidateInt4Grid(grid); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ": ", valid.message()));
  }

  std::vector<int32_t> words((*packed)->NumElements());
  std::memcpy(words.data(), (*packed)->bytes.data(), (*packed)->bytes.size());
  // Everything is copied out: the file's pages need not stay resident beside the copies.
  for (const io::TensorView* tensor : {*shape_tensor, *packed, *scale, zero_point, g_idx}) {
    if (tensor != nullptr) checkpoint.ReleaseResidentPages(*tensor);
  }
  return PackedInt4Weight{.grid = std::move(grid), .packed = std::move(words)};
}

std::vector<OwnedTensor> PackQuantizedTensors(const PackedInt4Weight& weight,
                                              std::string_view linear_name) {
  const Int4Grid& grid = weight.grid;
  const std::string prefix(linear_name);
  std::vector<OwnedTensor> tensors;
  tensors.push_back({prefix + ".weight_packed",
                     io::DType::kI32,
                     {grid.rows, Int4WordCount(grid.cols)},
                     ToBytes(weight.packed)});
  tensors.push_back({prefix + ".weight_scale",
                     grid.scale_dtype,
                     {grid.rows, grid.groups()},
                     EncodeFloats(grid.scales, grid.scale_dtype)});
  if (!grid.symmetric()) {
    tensors.push_back({prefix + ".weight_zero_point",
                       io::DType::kI32,
                       {Int4WordCount(grid.rows), grid.groups()},
                       ToBytes(PackZeroPoints(grid))});
  }
  if (!grid.group_index.empty()) {
    tensors.push_back(
        {prefix + ".weight_g_idx", io::DType::kI32, {grid.cols}, ToBytes(grid.group_index)});
  }
  tensors.push_back({prefix + ".weight_shape",
                     io::DType::kI64,
                     {2},
                     ToBytes(std::vector<int64_t>{grid.rows, grid.cols})});
  return tensors;
}

}  // namespace specd::quant
