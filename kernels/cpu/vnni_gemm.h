#pragma once
// y = x · Wᵀ for a weight of 4-bit (W4A8) or 8-bit (W8A8) codes on int8-quantized activations:
// AVX-512 VNNI multiplies 64 weight × activation byte pairs per instruction against the 16 of a
// float32 FMA, and AVX2 32 in two (maddubs, then a pairwise add to 32 bits), which is what a
// verify block, batched decode or a prefill chunk needs (the exact W4A16 kernel is bound by its
// FMAs from a few rows on). Not exact: activations are rounded per row and block of columns to
// int8 on the block's absolute maximum (tests state the error): blocks of 128 columns where the
// weight's groups allow, as llama.cpp's Q8_K does with 256, else 64 or 32 (its Q8_0).
//
// Weight layout, prepared at load: blocks of 16 output rows, each a run of 64-byte chunks whose
// 32-bit lane r holds row r's next four consecutive columns, so that one instruction advances 16
// outputs over 4 columns with no horizontal sum. 4 bits (RepackInt4ForVnni): a chunk covers 8
// columns, byte 4r + c holding column c in its low nibble and column 4 + c in its high one. 8 bits
// (QuantizeRowsForVnni): a chunk covers 4 columns, byte 4r + c holding column c. Codes are
// unsigned; per block and group, the 16 rows' scales s (IEEE half) and zero codes z make a weight
// (code − z) · s. Half scales and implicit zero codes (symmetric weights, the head) hold a group
// of 16 × 128 4-bit codes in 1056 bytes where float32 scales and offsets took 1152: 8 % less to
// read per decode step, and exact for a checkpoint's bf16 or f16 scales (bf16 ones from 2⁻¹⁷ on).
// Bf16Gemm (bf16_gemm.h) reads the 4-bit layout too, on bf16 activations.
#include <cstdint>
#include <vector>

#include "kernels/cpu/dense_gemm.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/w4a16_gemm.h"

namespace specd::kernels::cpu {

inline constexpr int64_t kVnniRowBlock = 16;
// Columns per activation scale: a weight's group size must be a multiple of the smallest, and
// the largest of them that divides it is taken (each block ends in a float epilogue per product
// sum: 128 columns instead of 32 made 16- and 64-row products 10–20 % faster).
inline constexpr int64_t kVnniMinActivationBlock = 32;
inline constexpr int64_t kVnniMaxActivationBlock = 128;

struct VnniMatrix {
  int bits = 4;                        // 4 or 8 per code
  HugePageVector<uint8_t> codes;       // [row blocks][cols · bits / 32][64]
  HugePageVector<uint16_t> scales;     // [row blocks][groups][16], IEEE half
  HugePageVector<uint8_t> zero_codes;  // [row blocks][groups][16]; empty: all midpoint()
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t group_size = 0;  // for VnniGemm a multiple of kVnniMinActivationBlock (Bf16Gemm: of 8)

  int64_t ByteSize() const {
    return static_cast<int64_t>(codes.size() + scales.size() * sizeof(uint16_t) +
                                zero_codes.size());
  }
  // The code of a zero weight where zero_codes is empty: 8 of 4 bits, 128 of 8.
  int midpoint() const { return bits == 4 ? 8 : 128; }
  // Columns per activation scale: VnniActivationBlock(group_size).
  int64_t activation_block() const;
};

// The activation block for weights in groups of `group_size` columns (a multiple of
// kVnniMinActivationBlock): the largest power of two up to kVnniMaxActivationBlock dividing it.
int64_t VnniActivationBlock(int64_t group_size);

// What runs VnniGemm: AVX-512 F + BW + VNNI, or AVX2 + FMA (the layout is the same).
enum class VnniGemmIsa { kNone, kAvx2, kAvx512Vnni };
// The best this CPU has; kNone: VnniGemm cannot run here.
VnniGemmIsa BestVnniGemmIsa();

// `w` in the 4-bit layout above, a weight (nibble − 8 − zero) · s with s rounded to half; rows
// past the last block's end are zeros. Needs F16C (every CPU with AVX2 has it).
VnniMatrix RepackInt4ForVnni(const Int4Matrix& w);

// `w` rounded to 8 bits per row on the row's absolute maximum / 127 taken to half (one group of
// all columns), in the 8-bit layout above: the optional int8 LM head. Needs cols a multiple of
// kVnniMinActivationBlock, and F16C.
VnniMatrix QuantizeRowsForVnni(const DenseMatrix& w, ThreadPool& pool = ThreadPool::Shared());

// W [w.rows, w.cols] as float32, row-major: what VnniGemm multiplies by. Needs F16C.
std::vector<float> Dequantize(const VnniMatrix& w);

// y [rows, w.rows] ≈ x [rows, w.cols] · Wᵀ, row-major float32, on `isa` (not kNone), which this
// CPU must have.
void VnniGemm(const float* x, int64_t rows, const VnniMatrix& w, float* y,
              ThreadPool& pool = ThreadPool::Shared(), VnniGemmIsa isa = BestVnniGemmIsa());

}  // namespace specd::kernels::cpu
