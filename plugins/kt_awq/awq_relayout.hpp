// The re-layout kt-kernel's awq method applies to AutoAWQ's GEMM words
// (convert_cpu_weights.py's unpack, reverse_awq_interleaving and pack; docs/kt-awq.md): every
// 4-bit value is kept, only moved. AutoAWQ packs eight output columns per I32 word in its
// interleaved order; kt stores the weight transposed, [out, in/8], eight input features per
// word in natural order (element 8j+p at bits 4p), and the zero points [groups, out/8] in
// natural order too. Words are little-endian; the pack wraps like kt's int64 sum cast to int32.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moequant::kt_awq {

// AutoAWQ qweight [k, n/8] (bytes, any alignment) -> kt's weight [n, k/8] (k % 8 == 0).
void relay_awq_weight(const std::byte* qweight, std::int64_t k, std::int64_t n, std::int32_t* out);

// AutoAWQ qzeros [groups, n/8] -> the same shape with the columns in natural order.
void relay_awq_zeros(const std::byte* qzeros, std::int64_t groups, std::int64_t n, std::int32_t* out);

// The 4-bit value of column `column` of row `row` of a kt-ordered [rows, columns/8] word
// matrix (weight or zeros, natural order).
inline int kt_nibble(const std::int32_t* words, std::int64_t columns, std::int64_t row, std::int64_t column) noexcept {
    const auto word = static_cast<std::uint32_t>(words[row * (columns / 8) + column / 8]);
    return static_cast<int>((word >> (4 * (column % 8))) & 0xF);
}

}  // namespace moequant::kt_awq
