#include "ggml_types.hpp"

#include "row_codecs.hpp"

#include <algorithm>
#include <cctype>

namespace moequant::ggml_quants {

const std::vector<GgmlType>& ggml_types() {
    static const std::vector<GgmlType> types = {
        {"f16", 1, 1, 2, quantize_row_f16, dequantize_row_f16},
        {"q4_0", 2, 32, 18, quantize_row_q4_0, dequantize_row_q4_0, &q4_0_grid},
        {"q4_1", 3, 32, 20, quantize_row_q4_1, dequantize_row_q4_1, &q4_1_grid},
        {"q5_0", 6, 32, 22, quantize_row_q5_0, dequantize_row_q5_0, &q5_0_grid},
        {"q5_1", 7, 32, 24, quantize_row_q5_1, dequantize_row_q5_1, &q5_1_grid},
        {"q8_0", 8, 32, 34, quantize_row_q8_0, dequantize_row_q8_0, &q8_0_grid},
        {"q2_K", 10, 256, 84, quantize_row_q2_k, dequantize_row_q2_k, &q2_k_grid},
        {"q3_K", 11, 256, 110, quantize_row_q3_k, dequantize_row_q3_k, &q3_k_grid},
        {"q4_K", 12, 256, 144, quantize_row_q4_k, dequantize_row_q4_k, &q4_k_grid},
        {"q5_K", 13, 256, 176, quantize_row_q5_k, dequantize_row_q5_k, &q5_k_grid},
        {"q6_K", 14, 256, 210, quantize_row_q6_k, dequantize_row_q6_k, &q6_k_grid},
        {"iq4_nl", 20, 32, 18, quantize_row_iq4_nl, dequantize_row_iq4_nl, &iq4_nl_grid},
        {"iq4_xs", 23, 256, 136, quantize_row_iq4_xs, dequantize_row_iq4_xs, &iq4_xs_grid},
        {"bf16", 30, 1, 2, quantize_row_bf16, dequantize_row_bf16},
        {"mxfp4", 39, 32, 17, quantize_row_mxfp4, dequantize_row_mxfp4},
    };
    return types;
}

const GgmlType* ggml_type_named(std::string_view name) noexcept {
    auto same = [&](std::string_view other) {
        return other.size() == name.size() && std::equal(other.begin(), other.end(), name.begin(), [](char a, char b) {
                   return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
               });
    };
    for (const auto& t : ggml_types())
        if (same(t.name)) return &t;
    return nullptr;
}

}  // namespace moequant::ggml_quants
