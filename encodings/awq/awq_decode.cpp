#include "awq_decode.hpp"

#include "packed_words.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>

#include <cstring>
#include <vector>

namespace moequant::encodings {
namespace {

[[noreturn]] void inconsistent(const EncodedWeight& w, const std::string& what) {
    throw Error(ErrorKind::internal, "AWQ weight " + shape_to_string(w.shape) + ": " + what, {.tensor = w.name});
}

}  // namespace

void decode_awq(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out) {
    if (w.shape.size() != 2) inconsistent(w, "not a 2-D weight");
    const std::int64_t n_total = w.shape[0], k_total = w.shape[1];
    const std::int64_t group = w.parameters.get_int("group", 0);
    const TensorView qweight = checkpoint.view(w.tensor("packed"));
    const TensorView qzeros = checkpoint.view(w.tensor("zeros"));
    const TensorView scales = checkpoint.view(w.tensor("scale"));
    // EncodedWeight is plain data: re-check what the indexing below relies on.
    const std::int64_t groups = group > 0 ? (k_total + group - 1) / group : 0;
    if (group < 1 || n_total % 8 || qweight.dtype != DType::I32 || qweight.shape != Shape{k_total, n_total / 8})
        inconsistent(w, "qweight " + shape_to_string(qweight.shape) + ", group " + std::to_string(group));
    if (scales.shape != Shape{groups, n_total} || (scales.dtype != DType::F16 && scales.dtype != DType::BF16 && scales.dtype != DType::F32))
        inconsistent(w, "scales " + shape_to_string(scales.shape));
    if (qzeros.dtype != DType::I32 || qzeros.shape != Shape{groups, n_total / 8}) inconsistent(w, "qzeros " + shape_to_string(qzeros.shape));
    const auto width = static_cast<std::size_t>(window.cols());
    const auto rows = static_cast<std::size_t>(window.rows());
    const std::size_t out_row = width * decode_target_bytes(target);
    if (out.size() != rows * out_row) inconsistent(w, "output of " + std::to_string(out.size()) + " bytes");

    const auto words_per_row = static_cast<std::size_t>(n_total / 8);
    std::vector<float> row(width);
    for (std::size_t i = 0; i < rows; ++i) {
        const auto n = static_cast<std::size_t>(window.row_begin + static_cast<std::int64_t>(i) * window.row_step);
        const std::size_t word = n / 8;
        const int shift = 4 * awq_nibble_of_column[n % 8];
        std::int64_t current_group = -1;
        float scale = 0;
        std::int32_t zero = 0;
        for (std::size_t j = 0; j < width; ++j) {
            const std::int64_t k = window.col_begin + static_cast<std::int64_t>(j);
            if (k / group != current_group) {
                current_group = k / group;
                const auto g = static_cast<std::size_t>(current_group);
                scale = scale_at(scales, g * static_cast<std::size_t>(n_total) + n);
                zero = static_cast<std::int32_t>((word_at(qzeros, g * words_per_row + word) >> shift) & 0xF);
            }
            const auto code = static_cast<std::int32_t>((word_at(qweight, static_cast<std::size_t>(k) * words_per_row + word) >> shift) & 0xF);
            row[j] = scale * static_cast<float>(code - zero);  // exact difference, one multiply
        }
        std::byte* dst = out.data() + i * out_row;
        if (target == DecodeTarget::bf16) convert_f32_to_bf16(row.data(), dst, width);
        else std::memcpy(dst, row.data(), width * 4);
    }
}

}  // namespace moequant::encodings
