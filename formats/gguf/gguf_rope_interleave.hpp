// llama's Q/K row permutation (convert_hf_to_gguf.py LlamaModel.permute): Hugging Face's Llama
// checkpoints rotate the two halves of each head (rotate_half), llama.cpp's llama rotates
// adjacent pairs, so the converter reorders each head's rows: row 2j+s of a head comes from row
// s*d/2+j (d the head's rows). Weights [heads*d, in] and biases [heads*d] alike. Also gpt-oss's
// converter's split of interleaved columns (gate_up_proj_bias[..., ::2] and [..., 1::2]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moequant::formats {

// Error(input) naming the tensor when its rows do not split into `heads` heads of an even size.
void check_rope_interleave(const std::string& tensor, std::int64_t rows, std::int64_t heads);

// A tensor's values (ggml dims `ne`: rows of ne[0], or single values when 1-D) with each head's
// rows interleaved; as they are when heads is 0.
std::vector<float> rope_interleave_rows(std::vector<float> values, const std::vector<std::int64_t>& ne, std::int64_t heads);

// Of each row of `row_length` values, those at offset, offset + step, ... (numpy's [..., offset::step]).
std::vector<float> take_interleaved_columns(const std::vector<float>& values, std::int64_t row_length, std::int64_t offset,
                                            std::int64_t step);

}  // namespace moequant::formats
