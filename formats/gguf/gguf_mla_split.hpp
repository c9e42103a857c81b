// DeepSeek's kv_b_proj as today's llama.cpp stores it for its absorbed MLA attention
// (convert_hf_to_gguf.py since 2025-04: kv_b viewed as [heads, nope + v, kv_lora], split into
// its nope and v rows, the first transposed): attn_k_b [heads, kv_lora, nope] (ggml ne {nope,
// kv_lora, heads}) and attn_v_b [heads, v, kv_lora] (ne {kv_lora, v, heads}). llama.cpp loads
// these instead of attn_kv_b when the file carries attention.key_length_mla (docs/gguf-format.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moequant::formats {

struct MlaShape {
    std::int64_t heads = 0, nope = 0, v = 0, kv_lora = 0;  // qk_nope_head_dim, v_head_dim, kv_lora_rank
};

enum class MlaPart { k_b, v_b };

// ggml dims of `part`.
std::vector<std::int64_t> mla_part_dims(const MlaShape& shape, MlaPart part);
// `part` of kv_b ([heads * (nope + v), kv_lora] row-major), row-major in its torch shape.
std::vector<float> mla_kv_b_part(const std::vector<float>& kv_b, const MlaShape& shape, MlaPart part);
// Error(input) naming `tensor` unless kv_b is [heads * (nope + v), kv_lora].
void check_mla_kv_b(const std::string& tensor, std::int64_t rows, std::int64_t cols, const MlaShape& shape);

}  // namespace moequant::formats
