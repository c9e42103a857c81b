// TODO(helper): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K rows.
#include "quant_search.hpp"
#include "row_codecs.hpp"

namespace moequant::ggml_quants {

void quantize_row_q2_k(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_q2_k(const std::uint8_t*, float*, std::int64_t) {}
void quantize_row_q3_k(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_q3_k(const std::uint8_t*, float*, std::int64_t) {}
void quantize_row_q4_k(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_q4_k(const std::uint8_t*, float*, std::int64_t) {}
void quantize_row_q5_k(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_q5_k(const std::uint8_t*, float*, std::int64_t) {}
void quantize_row_q6_k(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_q6_k(const std::uint8_t*, float*, std::int64_t) {}

}  // namespace moequant::ggml_quants
