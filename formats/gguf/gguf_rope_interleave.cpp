#include "gguf_rope_interleave.hpp"

#include <moequant/error.hpp>

#include <algorithm>

namespace moequant::formats {

void check_rope_interleave(const std::string& tensor, std::int64_t rows, std::int64_t heads) {
    if (heads <= 0 || rows % (2 * heads) != 0)
        throw Error(ErrorKind::input,
                    "has " + std::to_string(rows) + " rows, which do not split into " + std::to_string(heads) +
                        " heads of an even size for llama's rotary row order",
                    {.tensor = tensor, .code = "BadHeadShape"});
}

std::vector<float> rope_interleave_rows(std::vector<float> values, const std::vector<std::int64_t>& ne, std::int64_t heads) {
    const std::int64_t row_length = ne.size() > 1 ? ne[0] : 1;
    if (heads <= 0 || row_length <= 0) return values;
    const auto row = static_cast<std::size_t>(row_length);
    const std::size_t rows = values.size() / row, head_rows = rows / static_cast<std::size_t>(heads), half = head_rows / 2;
    std::vector<float> out(values.size());
    for (std::size_t h = 0; h < static_cast<std::size_t>(heads); ++h)
        for (std::size_t j = 0; j < half; ++j)
            for (std::size_t s = 0; s < 2; ++s) {
                const float* from = values.data() + (h * head_rows + s * half + j) * row;
                std::copy(from, from + row, out.data() + (h * head_rows + 2 * j + s) * row);
            }
    return out;
}

std::vector<float> take_interleaved_columns(const std::vector<float>& values, std::int64_t row_length, std::int64_t offset,
                                            std::int64_t step) {
    std::vector<float> out;
    if (row_length <= 0 || step <= 0) return out;
    out.reserve(values.size() / static_cast<std::size_t>(step) + 1);
    for (std::size_t row = 0; row + static_cast<std::size_t>(row_length) <= values.size(); row += static_cast<std::size_t>(row_length))
        for (std::int64_t c = offset; c < row_length; c += step) out.push_back(values[row + static_cast<std::size_t>(c)]);
    return out;
}

}  // namespace moequant::formats
