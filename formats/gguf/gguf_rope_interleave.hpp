// llama's Q/K row permutation (convert_hf_to_gguf.py LlamaModel.permute): Hugging Face's Llama
// checkpoints rotate the two halves of each head (rotate_half), llama.cpp's llama rotates
// adjacent pairs, so the converter reorders each head's rows: row 2j+s of a head comes from row
// s*d/2+j (d the head's rows). Weights [heads*d, in] and biases [heads*d] alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moequant::formats {

// Error(input) naming the tensor when its rows do not split into `heads` heads of an even size.
void check_rope_interleave(const std::string& tensor, std::int64_t rows, std::int64_t heads);

// The order of `rows` rows (or a bias's values) with each of `heads` heads' rows interleaved:
// output row i is source row order[i]. Identity when heads is 0. The plan gives it to the writer
// as the tensor's source rows (a weight) or columns (a bias).
std::vector<std::int64_t> rope_interleave_order(std::int64_t rows, std::int64_t heads);

// The inverse, one row at a time: where source row `row` lies among the interleaved rows
// (order[rope_interleaved_row(r)] == r). `rows` splits into `heads` heads of an even size.
std::int64_t rope_interleaved_row(std::int64_t row, std::int64_t rows, std::int64_t heads);

}  // namespace moequant::formats
