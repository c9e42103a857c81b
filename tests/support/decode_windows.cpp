#include "decode_windows.hpp"

#include <moequant/expert_matrix.hpp>

#include <cstring>

namespace moequant::test {

std::vector<std::int64_t> rows_differing_from_full_decode(const Checkpoint& checkpoint, const EncodedWeight& weight,
                                                          const DecodeWindow& window, DecodeTarget target) {
    const Tensor full = decode_matrix(checkpoint, weight, window.matrix, target);
    const std::size_t size = decode_target_bytes(target);
    const auto cols = static_cast<std::size_t>(weight.shape.back());
    const auto width = static_cast<std::size_t>(window.cols());
    std::vector<std::byte> part(static_cast<std::size_t>(window.rows()) * width * size);
    decode_weight(checkpoint, weight, window, target, part);
    std::vector<std::int64_t> differing;
    std::size_t i = 0;
    for (std::int64_t r = window.row_begin; r < window.row_end; r += window.row_step, ++i)
        if (std::memcmp(part.data() + i * width * size,
                        full.data() + (static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(window.col_begin)) * size,
                        width * size) != 0)
            differing.push_back(r);
    return differing;
}

}  // namespace moequant::test
