#include "ggml_quantizer.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <cctype>
#include <cstring>
#include <vector>

namespace moequant::ggml_quants {
namespace {

std::string lower(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string upper(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

// One row of `weight` as float32.
void read_row(const TensorView& weight, std::int64_t row, std::int64_t cols, float* out) {
    const std::byte* base = weight.data();
    switch (weight.dtype) {
    case DType::F32: std::memcpy(out, base + 4 * row * cols, static_cast<std::size_t>(4 * cols)); return;
    case DType::BF16: convert_bf16_to_f32(base + 2 * row * cols, out, static_cast<std::size_t>(cols)); return;
    case DType::F16: convert_f16_to_f32(base + 2 * row * cols, out, static_cast<std::size_t>(cols)); return;
    default:
        throw Error(ErrorKind::input, "GGUF types quantize BF16, F16 or F32 matrices, not " + std::string(dtype_name(weight.dtype)),
                    {.code = "UnsupportedDtype"});
    }
}

}  // namespace

GgmlQuantizer::GgmlQuantizer(const GgmlType& type)
    : type_(type),
      id_("gguf-" + lower(type.name)),
      description_("GGUF " + upper(type.name) + ": " +
                   (type.block == 1 ? std::to_string(8 * type.block_bytes) + "-bit floats, rounded as ggml rounds them"
                                    : "ggml's blocks of " + std::to_string(type.block) + " values in " + std::to_string(type.block_bytes) +
                                          " bytes, byte for byte as ggml quantizes")) {}

Options GgmlQuantizer::facts() const {
    Options facts;
    facts.set("gguf.type", std::string(type_.name));
    facts.set("gguf.type_id", std::to_string(type_.id));
    return facts;
}

std::vector<TensorSpec> GgmlQuantizer::output_layout(const Shape& m) const {
    if (m.size() != 2 || m[0] <= 0 || m[1] <= 0)
        throw Error(ErrorKind::input, "expected a non-empty 2-D weight, got shape " + shape_to_string(m), {.code = "ShapeMismatch"});
    if (m[1] % type_.block != 0)
        throw Error(ErrorKind::input,
                    "GGUF " + upper(type_.name) + " packs rows in blocks of " + std::to_string(type_.block) + " values; rows of " +
                        std::to_string(m[1]) + " are not a multiple",
                    {.code = "UnpackableShape", .hint = "llama-quantize falls back to another type for such tensors"});
    return {{"weight", DType::U8, {m[0], type_.row_bytes(m[1])}}};
}

QuantizedTensor GgmlQuantizer::quantize(const TensorView& weight) const { return quantize_rows(weight, nullptr); }

QuantizedTensor GgmlQuantizer::quantize_weighted(const TensorView& weight, std::span<const float> column_weights) const {
    if (weight.shape.size() == 2 && column_weights.size() != static_cast<std::size_t>(weight.shape[1]))
        throw Error(ErrorKind::input,
                    "the importance has " + std::to_string(column_weights.size()) + " column weights for rows of " +
                        std::to_string(weight.shape[1]),
                    {.code = "ImportanceSizeMismatch"});
    return quantize_rows(weight, column_weights.data());
}

QuantizedTensor GgmlQuantizer::quantize_rows(const TensorView& weight, const float* column_weights) const {
    const std::vector<TensorSpec> layout = output_layout(weight.shape);
    const std::int64_t rows = weight.shape[0], cols = weight.shape[1], row_bytes = layout[0].shape[1];
    Tensor blocks = Tensor::uninitialized(DType::U8, layout[0].shape);
    auto* out = blocks.data_as<std::uint8_t>();
    parallel_for(0, static_cast<std::size_t>(rows), 16, [&](std::size_t first, std::size_t last) {
        std::vector<float> row(static_cast<std::size_t>(cols));
        for (auto r = static_cast<std::int64_t>(first); r < static_cast<std::int64_t>(last); ++r) {
            read_row(weight, r, cols, row.data());
            type_.quantize(row.data(), out + r * row_bytes, cols, column_weights);
        }
    });
    QuantizedTensor q;
    q.method = upper(type_.name);
    q.parts.emplace_back("weight", std::move(blocks));
    return q;
}

Tensor GgmlQuantizer::dequantize(const QuantizedTensor& quantized, const Shape& shape) const {
    const std::vector<TensorSpec> layout = output_layout(shape);
    const Tensor* blocks = quantized.part("weight");
    if (!blocks || blocks->size_bytes() != static_cast<std::size_t>(layout[0].shape[0] * layout[0].shape[1]))
        throw Error(ErrorKind::input, "the stored GGUF " + upper(type_.name) + " rows are not " +
                                          std::to_string(layout[0].shape[1]) + " bytes each for shape " + shape_to_string(shape),
                    {.code = "SizeMismatch"});
    const std::int64_t rows = shape[0], cols = shape[1], row_bytes = layout[0].shape[1];
    Tensor out(DType::F32, shape);
    for (std::int64_t r = 0; r < rows; ++r)
        type_.dequantize(blocks->data_as<std::uint8_t>() + r * row_bytes, out.data_as<float>() + r * cols, cols);
    return out;
}

}  // namespace moequant::ggml_quants
