// TODO(helper): IQ4_NL, IQ4_XS rows.
#include "quant_search.hpp"
#include "row_codecs.hpp"

namespace moequant::ggml_quants {

void quantize_row_iq4_nl(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_iq4_nl(const std::uint8_t*, float*, std::int64_t) {}
void quantize_row_iq4_xs(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_iq4_xs(const std::uint8_t*, float*, std::int64_t) {}

}  // namespace moequant::ggml_quants
