#include "gguf_mix_quantizer.hpp"

#include "row_codecs.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/model_adapter.hpp>

#include <charconv>

namespace moequant::ggml_quants {
namespace {

constexpr std::string_view types_key = "gguf.expert_types", carry_key = "gguf.carry";
constexpr std::int64_t mxfp4_block = 32;

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    for (std::size_t start = 0;;) {
        const std::size_t cut = text.find(separator, start);
        parts.push_back(text.substr(start, cut == std::string_view::npos ? std::string_view::npos : cut - start));
        if (cut == std::string_view::npos) return parts;
        start = cut + 1;
    }
}

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

GgufMixQuantizer::GgufMixQuantizer() {
    auto types = std::make_shared<std::vector<std::unique_ptr<GgmlQuantizer>>>();
    for (const auto& t : ggml_types()) types->push_back(std::make_unique<GgmlQuantizer>(t));
    types_ = std::move(types);
}

std::string_view GgufMixQuantizer::description() const {
    return "GGUF experts in the types the gguf format chose per tensor (llama-quantize's presets and --tensor-type), "
           "each byte for byte as ggml quantizes";
}

Options GgufMixQuantizer::facts() const {
    Options facts;
    facts.set("gguf.mixture", "true");  // the format names the types per tensor
    return facts;
}

Options GgufMixQuantizer::settings() const {
    Options settings;
    if (!expert_types_.empty()) settings.set(std::string(types_key), expert_types_);
    if (carry_mxfp4_) settings.set(std::string(carry_key), "mxfp4");
    return settings;
}

std::shared_ptr<const Quantizer> GgufMixQuantizer::configure(const Options& options) const {
    const auto text = options.get(types_key);
    if (!text) return nullptr;
    auto refuse = [&](const std::string& why) {
        return Error(ErrorKind::usage, "option " + std::string(types_key) + " '" + text->substr(0, 80) + "': " + why);
    };
    auto mix = std::make_shared<GgufMixQuantizer>(*this);
    mix->layers_.clear();
    mix->expert_types_ = *text;
    for (std::string_view entry : split(*text, ';')) {
        const std::size_t colon = entry.find(':');
        std::int64_t layer = -1;
        if (colon == std::string_view::npos ||
            std::from_chars(entry.data(), entry.data() + colon, layer).ptr != entry.data() + colon || layer < 0)
            throw refuse("expected LAYER:GATE,UP,DOWN entries");
        const std::vector<std::string_view> names = split(entry.substr(colon + 1), ',');
        if (names.size() != 3) throw refuse("layer " + std::to_string(layer) + " needs three types");
        std::array<const GgmlQuantizer*, 3> chosen{};
        for (std::size_t p = 0; p < 3; ++p) {
            const GgmlType* type = ggml_type_named(names[p]);
            if (!type) throw refuse("'" + std::string(names[p]) + "' is no GGUF type moequant writes");
            for (const auto& q : *types_)
                if (&q->type() == type) chosen[p] = q.get();
        }
        if (!mix->layers_.emplace(layer, chosen).second) throw refuse("layer " + std::to_string(layer) + " is given twice");
    }
    if (const auto carry = options.get(carry_key)) {
        if (*carry != "mxfp4")
            throw Error(ErrorKind::usage, "option " + std::string(carry_key) + " '" + carry->substr(0, 40) + "': only mxfp4 is carried");
        for (const auto& [layer, chosen] : mix->layers_)
            for (const GgmlQuantizer* q : chosen)
                if (q->type().name != "mxfp4")
                    throw refuse("layer " + std::to_string(layer) + " has a " + std::string(q->type().name) +
                                 " tensor; MXFP4 codes are carried only when every expert tensor is MXFP4");
        mix->carry_mxfp4_ = true;
    }
    return mix;
}

const Quantizer* GgufMixQuantizer::for_matrix(const MatrixRole& role) const {
    const auto it = layers_.find(role.layer);
    if (it == layers_.end()) return nullptr;  // the mixture itself then refuses, naming the layer
    return it->second[static_cast<std::size_t>(role.projection)];
}

std::vector<TensorSpec> GgufMixQuantizer::output_layout(const Shape&) const {
    if (layers_.empty())
        throw Error(ErrorKind::usage, "quantizer 'gguf' takes its types from the gguf format",
                    {.hint = "convert --format gguf --quant-method PRESET (e.g. Q4_K_M), or a single type: --quantizer gguf-q4_k"});
    throw Error(ErrorKind::internal, "quantizer 'gguf' has no type for this expert matrix's layer");
}

QuantizedTensor GgufMixQuantizer::quantize(const TensorView& weight) const {
    output_layout(weight.shape);
    return {};
}

QuantizedTensor GgufMixQuantizer::quantize_weighted(const TensorView& weight, std::span<const float>) const {
    output_layout(weight.shape);
    return {};
}

Tensor GgufMixQuantizer::dequantize(const QuantizedTensor&, const Shape& shape) const {
    output_layout(shape);
    return {};
}

std::shared_ptr<const Quantizer> GgufMixQuantizer::bind_source(const Checkpoint& checkpoint, const ExpertWeightSource& source) const {
    stored_mxfp4(checkpoint, source);
    return std::make_shared<GgufMixQuantizer>(*this);
}

QuantizedTensor GgufMixQuantizer::carry(const Checkpoint& checkpoint, const ExpertWeightSource& source) const {
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
