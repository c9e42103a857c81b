// Plain floating-point weights: BF16 copied as is, F16 widened exactly, F32 rounded to BF16
// once (nearest even) for the BF16 target; the F32 target gets every stored value exactly.
// model-families.md §3.2, §4.4.
#include "encoding_rules.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/plugin.hpp>

#include <cstring>

namespace moequant::encodings {
namespace {

std::string input_type_of(DType d) {
    switch (d) {
        case DType::BF16: return "bf16";
        case DType::F16: return "fp16";
        default: return "fp32";
    }
}

class FloatEncoding final : public SourceEncoding {
public:
    std::string_view id() const override { return "float"; }
    std::string_view description() const override { return "plain BF16, F16 and F32 weights"; }
    std::vector<std::string> input_types() const override { return {"bf16", "fp16", "fp32"}; }

    std::optional<std::string> weight_of(const TensorInfo&) const override { return std::nullopt; }

    int recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig*, EncodedWeight& out) const override {
        if (!checkpoint.contains(name)) return 0;
        const TensorInfo& info = checkpoint.info(name);
        if (info.dtype != DType::BF16 && info.dtype != DType::F16 && info.dtype != DType::F32) return 0;
        if (info.shape.empty() || info.shape.size() > 3) return 0;
        out.shape = info.shape;
        out.input_type = input_type_of(info.dtype);
        out.tensors = {{"weight", std::string(name)}};
        out.parameters.set("dtype", std::string(dtype_name(info.dtype)));
        out.summary = std::string(dtype_name(info.dtype));
        return 10;
    }

    void decode(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out) const override {
        const TensorView v = checkpoint.view(w.primary());
        const std::size_t element = dtype_bits(v.dtype) / 8, cols = static_cast<std::size_t>(window.cols());
        const std::size_t out_row = cols * decode_target_bytes(target);
        std::size_t i = 0;
        for (std::int64_t r = window.row_begin; r < window.row_end; r += window.row_step, ++i) {
            const TensorView row{v.dtype,
                                 {static_cast<std::int64_t>(cols)},
                                 v.bytes.subspan(element_offset(v.shape, window.matrix, r, window.col_begin, element),
                                                 cols * element)};
            std::byte* dst = out.data() + i * out_row;
            if (target == DecodeTarget::f32) {
                decode_to_f32(row, std::span<float>(reinterpret_cast<float*>(dst), cols));
            } else if (v.dtype == DType::BF16) {
                std::memcpy(dst, row.data(), cols * 2);
            } else {
                decode_to_bf16(row, std::span<std::uint16_t>(reinterpret_cast<std::uint16_t*>(dst), cols));
            }
        }
    }
};

}  // namespace
}  // namespace moequant::encodings

MOEQUANT_PLUGIN("float", "1.0.0", MOEQUANT_KIND_ENCODING, "plain BF16/F16/F32 weights") {
    registrar.add(std::make_unique<moequant::encodings::FloatEncoding>());
}
