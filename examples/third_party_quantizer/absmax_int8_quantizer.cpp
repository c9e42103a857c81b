// An example third-party quantizer: per-row symmetric INT8 ("absmax"), scale = amax / 127,
// codes = round-half-even(w / scale), clamped to [-127, 127]. Built against the installed SDK
// only; it uses the SDK's dtype decoding and parallel loop.

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>
#include <moequant/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

using namespace moequant;

class AbsmaxInt8Quantizer final : public Quantizer {
public:
    std::string_view id() const override { return "example-absmax-int8"; }
    std::string_view description() const override { return "example plugin: per-row symmetric INT8 (amax/127)"; }

    std::vector<TensorSpec> output_layout(const Shape& matrix) const override {
        if (matrix.size() != 2) throw Error(ErrorKind::input, "expected a 2-D weight, got shape " + shape_to_string(matrix));
        return {{"weight", DType::I8, matrix}, {"scale", DType::F32, {matrix[0]}}};
    }

    QuantizedTensor quantize(const TensorView& weight) const override {
        output_layout(weight.shape);
        const std::int64_t rows = weight.shape[0], cols = weight.shape[1];
        std::vector<float> values(static_cast<std::size_t>(rows * cols));
        decode_to_f32(weight, values);

        QuantizedTensor out;
        out.method = "ABSMAX_INT8";
        Tensor codes(DType::I8, {rows, cols});
        Tensor scales(DType::F32, {rows});
        auto* q = codes.data_as<std::int8_t>();
        auto* s = scales.data_as<float>();
        parallel_for(0, static_cast<std::size_t>(rows), 16, [&](std::size_t begin, std::size_t end) {
            for (std::size_t r = begin; r < end; ++r) {
                const float* row = values.data() + r * static_cast<std::size_t>(cols);
                float amax = 0;
                for (std::int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(row[c]));
                float scale = amax / 127.0f;
                s[r] = scale;
                for (std::int64_t c = 0; c < cols; ++c) {
                    float x = scale > 0 ? std::nearbyint(row[c] / scale) : 0.0f;
                    q[r * cols + c] = static_cast<std::int8_t>(std::clamp(x, -127.0f, 127.0f));
                }
            }
        });
        out.parts.emplace_back("weight", std::move(codes));
        out.parts.emplace_back("scale", std::move(scales));
        return out;
    }

    Tensor dequantize(const QuantizedTensor& quantized, const Shape& shape) const override {
        const Tensor* codes = quantized.part("weight");
        const Tensor* scales = quantized.part("scale");
        if (!codes || !scales || shape.size() != 2) throw Error(ErrorKind::input, "not an ABSMAX_INT8 tensor");
        Tensor out(DType::F32, shape);
        for (std::int64_t r = 0; r < shape[0]; ++r)
            for (std::int64_t c = 0; c < shape[1]; ++c)
                out.data_as<float>()[r * shape[1] + c] =
                    codes->data_as<std::int8_t>()[r * shape[1] + c] * scales->data_as<float>()[r];
        return out;
    }
};

}  // namespace

MOEQUANT_PLUGIN("example_absmax_int8", "1.0.0", MOEQUANT_KIND_QUANTIZER,
                "example third-party quantizer built against the installed SDK") {
    registrar.add(std::make_unique<AbsmaxInt8Quantizer>());
}
