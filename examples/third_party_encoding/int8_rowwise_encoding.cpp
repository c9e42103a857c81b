// An example source encoding, built out of tree against the installed SDK: weights stored as
// INT8 codes `<m>.weight` (I8 [N, K]) with one F32 scale per row `<m>.weight_row_scale` ([N]),
// w[n][k] = q[n][k] x s[n]. The example adapter (../third_party_adapter) can synthesize it
// (`moequant synth --family toy_moe --dtype int8-rowwise`).
//
// What every encoding does: claim its side tensors by suffix (weight_of), recognise a weight
// from the headers alone (recognise), and decode any window of it with one float32 multiply per
// value, rounded to BF16 (nearest even, through the SDK) when BF16 is asked for (decode).
#include <moequant/checkpoint.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/plugin.hpp>
#include <moequant/source_encoding.hpp>

#include <cstring>
#include <vector>

namespace {

using namespace moequant;

constexpr std::string_view scale_suffix = "_row_scale";

class Int8RowwiseEncoding final : public SourceEncoding {
public:
    std::string_view id() const override { return "example-int8-rowwise"; }
    std::string_view description() const override { return "example: INT8 weights with one F32 scale per row"; }
    std::vector<std::string> input_types() const override { return {"int8"}; }

    std::optional<std::string> weight_of(const TensorInfo& tensor) const override {
        if (tensor.name.size() > scale_suffix.size() && tensor.name.ends_with(scale_suffix))
            return tensor.name.substr(0, tensor.name.size() - scale_suffix.size());
        return std::nullopt;
    }

    int recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig*, EncodedWeight& out) const override {
        const std::string weight(name), scale = weight + std::string(scale_suffix);
        if (!checkpoint.contains(weight) || !checkpoint.contains(scale)) return 0;
        const TensorInfo& w = checkpoint.info(weight);
        const TensorInfo& s = checkpoint.info(scale);
        if (w.dtype != DType::I8 || w.shape.size() != 2) return 0;
        if (s.dtype != DType::F32 || s.shape != Shape{w.shape[0]})
            throw Error(ErrorKind::input,
                        "is the row scale of an INT8 weight " + shape_to_string(w.shape) + " but is " +
                            std::string(dtype_name(s.dtype)) + " " + shape_to_string(s.shape) + " (F32 " +
                            shape_to_string({w.shape[0]}) + " expected)",
                        {.tensor = scale, .code = "ScaleShapeMismatch"});
        out.shape = w.shape;
        out.input_type = "int8";
        out.tensors = {{"weight", weight}, {"scale", scale}};
        out.summary = "INT8, one F32 scale per row (example)";
        return 20;
    }

    void decode(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out) const override {
        const TensorView codes = checkpoint.view(w.tensor("weight"));
        const TensorView scales = checkpoint.view(w.tensor("scale"));
        const auto cols = static_cast<std::size_t>(w.shape[1]), width = static_cast<std::size_t>(window.cols());
        std::vector<float> row(width);
        std::size_t i = 0;
        for (std::int64_t r = window.row_begin; r < window.row_end; r += window.row_step, ++i) {
            float s;
            std::memcpy(&s, scales.data() + static_cast<std::size_t>(r) * 4, 4);
            const auto* q = reinterpret_cast<const std::int8_t*>(codes.data()) + static_cast<std::size_t>(r) * cols +
                            static_cast<std::size_t>(window.col_begin);
            for (std::size_t j = 0; j < width; ++j) row[j] = static_cast<float>(q[j]) * s;
            std::byte* dst = out.data() + i * width * decode_target_bytes(target);
            if (target == DecodeTarget::f32) std::memcpy(dst, row.data(), width * 4);
            else convert_f32_to_bf16(row.data(), dst, width);
        }
    }
};

}  // namespace

MOEQUANT_PLUGIN("example_int8_rowwise", "1.0.0", MOEQUANT_KIND_ENCODING, "example INT8 row-scaled weight encoding") {
    registrar.add(std::make_unique<Int8RowwiseEncoding>());
}
