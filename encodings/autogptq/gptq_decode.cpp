#include "gptq_decode.hpp"

#include "encoding_rules.hpp"
#include "packed_words.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace moequant::encodings {
namespace {

// Output rows decoded together. Row n of the logical weight is column n of qweight, so a tile
// reads `tile_rows` neighbouring words of each qweight row (one cache line when the rows are
// consecutive) and writes eight values into each of its rows.
constexpr std::size_t tile_rows = 16;

[[noreturn]] void inconsistent(const EncodedWeight& w, const std::string& what) {
    throw Error(ErrorKind::internal, "GPTQ weight " + shape_to_string(w.shape) + ": " + what, {.tensor = w.name});
}

// The group of every column of the window: g_idx[k] when the checkpoint has it (validated over
// all of K, so every window of a bad file fails the same way), else k / group.
std::vector<std::int64_t> column_groups(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window,
                                        std::int64_t groups) {
    const std::int64_t k_total = w.shape[1];
    std::vector<std::int64_t> out(static_cast<std::size_t>(window.cols()));
    const std::string& g_idx = w.tensor("g_idx");
    if (g_idx.empty()) {
        const std::int64_t group = w.parameters.get_int("group", 0);
        if (group < 1 || (k_total - 1) / group >= groups) inconsistent(w, "group size " + std::to_string(group));
        for (std::size_t j = 0; j < out.size(); ++j)
            out[j] = (window.col_begin + static_cast<std::int64_t>(j)) / group;
        return out;
    }
    const TensorView v = checkpoint.view(g_idx);
    if (v.dtype != DType::I32 || v.shape != Shape{k_total}) inconsistent(w, "g_idx " + shape_to_string(v.shape));
    for (std::int64_t k = 0; k < k_total; ++k) {
        std::int32_t g;
        std::memcpy(&g, v.data() + static_cast<std::size_t>(k) * 4, 4);
        if (g < 0 || g >= groups)
            refuse(checkpoint, g_idx,
                   "entry " + std::to_string(k) + " is " + std::to_string(g) + ", outside the " + std::to_string(groups) +
                       " groups of the scales [0, " + std::to_string(groups) + ")",
                   "GroupIndexOutOfRange");
        if (k >= window.col_begin && k < window.col_end) out[static_cast<std::size_t>(k - window.col_begin)] = g;
    }
    return out;
}

}  // namespace

void decode_gptq(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                 std::span<std::byte> out) {
    if (w.shape.size() != 2) inconsistent(w, "not a 2-D weight");
    const std::int64_t n_total = w.shape[0], k_total = w.shape[1];
    const TensorView qweight = checkpoint.view(w.tensor("packed"));
    const TensorView qzeros = checkpoint.view(w.tensor("zeros"));
    const TensorView scales = checkpoint.view(w.tensor("scale"));
    // EncodedWeight is plain data: re-check what the indexing below relies on.
    if (qweight.dtype != DType::I32 || qweight.shape != Shape{k_total / 8, n_total} || k_total % 8 || n_total % 8)
        inconsistent(w, "qweight " + shape_to_string(qweight.shape));
    if (scales.shape.size() != 2 || scales.shape[1] != n_total || scales.shape[0] < 1 ||
        (scales.dtype != DType::F16 && scales.dtype != DType::BF16 && scales.dtype != DType::F32))
        inconsistent(w, "scales " + shape_to_string(scales.shape));
    const std::int64_t groups = scales.shape[0];
    if (qzeros.dtype != DType::I32 || qzeros.shape != Shape{groups, n_total / 8})
        inconsistent(w, "qzeros " + shape_to_string(qzeros.shape));
    const auto width = static_cast<std::size_t>(window.cols());
    const auto rows = static_cast<std::size_t>(window.rows());
    const std::size_t out_row = width * decode_target_bytes(target);
    if (out.size() != rows * out_row) inconsistent(w, "output of " + std::to_string(out.size()) + " bytes");
    if (rows == 0 || width == 0) return;

    const std::vector<std::int64_t> group_of = column_groups(checkpoint, w, window, groups);
    const bool v1 = w.parameters.get_string("zeros", "v1") == "v1";
    const auto n_words = static_cast<std::size_t>(n_total), zero_words = n_words / 8;
    const std::int64_t r_first = window.col_begin / 8, r_last = (window.col_end - 1) / 8;

    // The groups the window's columns use, numbered densely ("slots") so that the per-tile
    // tables stay as small as the window, whatever the scales' header claims.
    std::vector<std::int64_t> slot_of_group(static_cast<std::size_t>(groups), -1);
    std::vector<std::size_t> group_of_slot;
    std::vector<std::size_t> slot_of(width);
    for (std::size_t j = 0; j < width; ++j) {
        auto& slot = slot_of_group[static_cast<std::size_t>(group_of[j])];
        if (slot < 0) {
            slot = static_cast<std::int64_t>(group_of_slot.size());
            group_of_slot.push_back(static_cast<std::size_t>(group_of[j]));
        }
        slot_of[j] = static_cast<std::size_t>(slot);
    }
    const std::size_t slots = group_of_slot.size();
    // With groups of 16 or more window columns on average, a table of the 16 values each code
    // takes in (slot, row) costs at most one multiply per output and turns the inner loop into a
    // lookup; smaller groups compute each value directly. Both give the same exact product.
    const bool by_table = slots * 16 <= width;
    const std::size_t entry = by_table ? 16 : 1;
    for (auto& slot : slot_of) slot *= tile_rows * entry;

    std::vector<float> tile(tile_rows * width);
    std::vector<float> value_of(by_table ? slots * tile_rows * 16 : 0);  // [slot][t][code]
    std::vector<float> scale_of(by_table ? 0 : slots * tile_rows);      // [slot][t]
    std::vector<std::int32_t> zero_of(by_table ? 0 : slots * tile_rows);
    std::size_t n_of[tile_rows];
    for (std::size_t first = 0; first < rows; first += tile_rows) {
        const std::size_t count = std::min(tile_rows, rows - first);
        for (std::size_t t = 0; t < count; ++t)
            n_of[t] = static_cast<std::size_t>(window.row_begin + static_cast<std::int64_t>(first + t) * window.row_step);
        for (std::size_t slot = 0; slot < slots; ++slot)
            for (std::size_t t = 0; t < count; ++t) {
                const std::size_t g = group_of_slot[slot], n = n_of[t], at = slot * tile_rows + t;
                const float scale = scale_at(scales, g * n_words + n);
                std::uint32_t z = word_at(qzeros, g * zero_words + n / 8);
                if (v1) z = v1_zero_word(z);
                const auto zero = static_cast<std::int32_t>((z >> (4 * (n % 8))) & 0xF);
                if (!by_table) {
                    scale_of[at] = scale;
                    zero_of[at] = zero;
                    continue;
                }
                for (std::int32_t code = 0; code < 16; ++code)
                    value_of[at * 16 + static_cast<std::size_t>(code)] = scale * static_cast<float>(code - zero);
            }
        for (std::int64_t r = r_first; r <= r_last; ++r) {
            const std::int64_t k0 = r * 8;
            const int j_begin = static_cast<int>(std::max<std::int64_t>(0, window.col_begin - k0));
            const int j_end = static_cast<int>(std::min<std::int64_t>(8, window.col_end - k0));
            const auto column = static_cast<std::size_t>(k0 - window.col_begin + j_begin);  // of the first value
            const std::size_t* slot = slot_of.data() + column;
            for (std::size_t t = 0; t < count; ++t) {
                const std::uint32_t word = word_at(qweight, static_cast<std::size_t>(r) * n_words + n_of[t]) >> (4 * j_begin);
                float* dst = tile.data() + t * width + column;
                if (by_table) {
                    const float* values = value_of.data() + t * 16;
                    if (j_end - j_begin == 8)  // a whole word: a fixed trip count the compiler unrolls
                        for (int j = 0; j < 8; ++j) dst[j] = values[slot[j] + ((word >> (4 * j)) & 0xF)];
                    else
                        for (int j = 0; j < j_end - j_begin; ++j) dst[j] = values[slot[j] + ((word >> (4 * j)) & 0xF)];
                    continue;
                }
                for (int j = 0; j < j_end - j_begin; ++j) {
                    const auto code = static_cast<std::int32_t>((word >> (4 * j)) & 0xF);
                    const std::size_t at = slot[j] + t;
                    dst[j] = scale_of[at] * static_cast<float>(code - zero_of[at]);  // exact difference, one multiply
                }
            }
        }
        for (std::size_t t = 0; t < count; ++t) {
            std::byte* dst = out.data() + (first + t) * out_row;
            if (target == DecodeTarget::bf16) convert_f32_to_bf16(tile.data() + t * width, dst, width);
            else std::memcpy(dst, tile.data() + t * width, width * 4);
        }
    }
}

}  // namespace moequant::encodings
