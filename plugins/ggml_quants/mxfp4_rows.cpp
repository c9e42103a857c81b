// TODO(helper): MXFP4 rows.
#include "quant_search.hpp"
#include "row_codecs.hpp"

namespace moequant::ggml_quants {

void quantize_row_mxfp4(const float*, std::uint8_t*, std::int64_t, const float*) {}
void dequantize_row_mxfp4(const std::uint8_t*, float*, std::int64_t) {}

}  // namespace moequant::ggml_quants
