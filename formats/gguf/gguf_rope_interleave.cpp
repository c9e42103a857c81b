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

std::vector<std::int64_t> rope_interleave_order(std::int64_t rows, std::int64_t heads) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(std::max<std::int64_t>(rows, 0)));
    if (heads <= 0) {
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
        return order;
    }
    const std::int64_t head_rows = rows / heads, half = head_rows / 2;
    for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t j = 0; j < half; ++j)
            for (std::int64_t s = 0; s < 2; ++s) order[static_cast<std::size_t>(h * head_rows + 2 * j + s)] = h * head_rows + s * half + j;
    return order;
}

std::int64_t rope_interleaved_row(std::int64_t row, std::int64_t rows, std::int64_t heads) {
    const std::int64_t head_rows = rows / heads, half = head_rows / 2, in_head = row % head_rows;
    return row - in_head + 2 * (in_head % half) + in_head / half;
}

}  // namespace moequant::formats
