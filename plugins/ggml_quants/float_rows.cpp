// TODO(helper): F16 and BF16 rows (ggml_fp32_to_fp16_row / ggml_fp32_to_bf16_row_ref).
#include "quant_search.hpp"
#include "row_codecs.hpp"

#include <cstring>

namespace moequant::ggml_quants {

void quantize_row_f16(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_f16(const std::uint8_t*, float*, std::int64_t) {}
void quantize_row_bf16(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_bf16(const std::uint8_t*, float*, std::int64_t) {}

}  // namespace moequant::ggml_quants
