#include "gguf_mla_split.hpp"

#include <moequant/error.hpp>

namespace moequant::formats {

std::vector<std::int64_t> mla_part_dims(const MlaShape& s, MlaPart part) {
    return part == MlaPart::k_b ? std::vector<std::int64_t>{s.nope, s.kv_lora, s.heads} : std::vector<std::int64_t>{s.kv_lora, s.v, s.heads};
}

void check_mla_kv_b(const std::string& tensor, std::int64_t rows, std::int64_t cols, const MlaShape& s) {
    if (s.heads <= 0 || s.nope <= 0 || s.v <= 0 || s.kv_lora <= 0 || rows != s.heads * (s.nope + s.v) || cols != s.kv_lora)
        throw Error(ErrorKind::input,
                    "is [" + std::to_string(rows) + ", " + std::to_string(cols) + "]; llama.cpp's MLA split needs [heads x (qk_nope_head_dim + v_head_dim), kv_lora_rank] = [" +
                        std::to_string(s.heads * (s.nope + s.v)) + ", " + std::to_string(s.kv_lora) + "]",
                    {.tensor = tensor, .code = "ShapeMismatch"});
}

std::vector<float> mla_kv_b_part(const std::vector<float>& kv_b, const MlaShape& s, MlaPart part) {
    const std::int64_t per_head = s.nope + s.v;
    std::vector<float> out;
    out.reserve(static_cast<std::size_t>(s.heads * (part == MlaPart::k_b ? s.nope : s.v) * s.kv_lora));
    for (std::int64_t h = 0; h < s.heads; ++h) {
        const float* head = kv_b.data() + h * per_head * s.kv_lora;
        if (part == MlaPart::k_b) {
            for (std::int64_t r = 0; r < s.kv_lora; ++r)  // transposed: row r holds column r of the nope rows
                for (std::int64_t c = 0; c < s.nope; ++c) out.push_back(head[c * s.kv_lora + r]);
        } else {
            out.insert(out.end(), head + s.nope * s.kv_lora, head + per_head * s.kv_lora);
        }
    }
    return out;
}

}  // namespace moequant::formats
