#include "carried_mxfp4_quantizer.hpp"

#include "row_codecs.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/model_adapter.hpp>

namespace moequant::ggml_quants {
namespace {

constexpr std::int64_t mxfp4_block = 32;

// Where an expert matrix's MXFP4 rows are stored: its first row and the distance between rows
// (gpt-oss's gate and up interleave: 2) among the packed rows of its weight.
struct StoredMxfp4 {
    const std::uint8_t* codes = nullptr;   // cols / 2 bytes per stored row
    const std::uint8_t* scales = nullptr;  // cols / 32 bytes per stored row
    std::int64_t first_row = 0, row_step = 1, cols = 0;
};

StoredMxfp4 stored_mxfp4(const Checkpoint& checkpoint, const ExpertWeightSource& source) {
    auto refuse = [&](const std::string& why) {
        return Error(ErrorKind::input, why, {.tensor = source.tensor, .code = "NotMxfp4",
                                             .hint = "another --quant-method than MXFP4_MOE or a float preset quantizes its values"});
    };
    const EncodedWeight* w = checkpoint.find_weight(source.tensor);
    if (!w || w->encoding != "mxfp4")
        throw refuse("is " + (w ? w->summary : std::string("no encoded weight")) + "; the gguf quantizer carries MXFP4 experts only");
    const auto& slice = source.slice;
    if (slice && (slice->along_columns || slice->transposed))
        throw refuse("is a column or transposed slice of its MXFP4 tensor; ggml's MXFP4 rows are carried whole");
    const Shape& shape = w->shape;
    const std::int64_t matrices = shape.size() == 3 ? shape[0] : 1, rows = shape[shape.size() - 2], cols = shape.back();
    const std::int64_t matrix = slice ? slice->expert : 0, offset = slice ? slice->offset : 0, step = slice ? slice->step : 1;
    if ((shape.size() != 2 && shape.size() != 3) || cols != source.cols || cols % mxfp4_block != 0 || matrix < 0 || matrix >= matrices ||
        offset < 0 || step < 1 || source.rows < 1 || offset + (source.rows - 1) * step >= rows)
        throw refuse("is not " + std::to_string(source.rows) + " x " + std::to_string(source.cols) +
                     " MXFP4 rows of whole 32-element blocks in its weight of shape " + shape_to_string(shape));
    const TensorView codes = checkpoint.view(w->primary()), scales = checkpoint.view(w->tensor("scale"));
    const auto stored_rows = static_cast<std::uint64_t>(matrices * rows);
    if (codes.size_bytes() != stored_rows * static_cast<std::uint64_t>(cols / 2) ||
        scales.size_bytes() != stored_rows * static_cast<std::uint64_t>(cols / mxfp4_block))
        throw refuse("has MXFP4 tensors whose sizes do not match its shape " + shape_to_string(shape));
    return {reinterpret_cast<const std::uint8_t*>(codes.data()), reinterpret_cast<const std::uint8_t*>(scales.data()),
            matrix * rows + offset, step, cols};
}

}  // namespace

std::shared_ptr<const Quantizer> CarriedMxfp4Quantizer::bind_source(const Checkpoint& checkpoint, const ExpertWeightSource& source) const {
    stored_mxfp4(checkpoint, source);
    return std::make_shared<CarriedMxfp4Quantizer>(mxfp4_);
}

QuantizedTensor CarriedMxfp4Quantizer::carry(const Checkpoint& checkpoint, const ExpertWeightSource& source) const {
    const StoredMxfp4 s = stored_mxfp4(checkpoint, source);
    const std::int64_t row_bytes = s.cols / mxfp4_block * (1 + mxfp4_block / 2);
    Tensor blocks = Tensor::uninitialized(DType::U8, {source.rows, row_bytes});
    auto* out = blocks.data_as<std::uint8_t>();
    for (std::int64_t r = 0; r < source.rows; ++r) {
        const std::int64_t stored = s.first_row + r * s.row_step;
        relay_mxfp4_row(s.codes + stored * (s.cols / 2), s.scales + stored * (s.cols / mxfp4_block), out + r * row_bytes, s.cols);
    }
    QuantizedTensor q;
    q.method = "MXFP4";
    q.parts.emplace_back("weight", std::move(blocks));
    return q;
}

}  // namespace moequant::ggml_quants
