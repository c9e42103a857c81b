// TODO(helper): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 rows.
#include "quant_search.hpp"
#include "row_codecs.hpp"

namespace moequant::ggml_quants {

void quantize_row_q4_0(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_q4_0(const std::uint8_t*, float*, std::int64_t) {}
void quantize_row_q4_1(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_q4_1(const std::uint8_t*, float*, std::int64_t) {}
void quantize_row_q5_0(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_q5_0(const std::uint8_t*, float*, std::int64_t) {}
void quantize_row_q5_1(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_q5_1(const std::uint8_t*, float*, std::int64_t) {}
void quantize_row_q8_0(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_q8_0(const std::uint8_t*, float*, std::int64_t) {}

}  // namespace moequant::ggml_quants
