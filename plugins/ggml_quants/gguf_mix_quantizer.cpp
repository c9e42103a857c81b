#include "gguf_mix_quantizer.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/model_adapter.hpp>

#include <charconv>

namespace moequant::ggml_quants {
namespace {

constexpr std::string_view types_key = "gguf.expert_types", carry_key = "gguf.carry";

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    for (std::size_t start = 0;;) {
        const std::size_t cut = text.find(separator, start);
        parts.push_back(text.substr(start, cut == std::string_view::npos ? std::string_view::npos : cut - start));
        if (cut == std::string_view::npos) return parts;
        start = cut + 1;
    }
}

}  // namespace

GgufMixQuantizer::GgufMixQuantizer(bool gptq) : gptq_(gptq) {
    auto types = std::make_shared<std::vector<std::unique_ptr<GgmlQuantizer>>>();
    for (const auto& t : ggml_types()) types->push_back(std::make_unique<GgmlQuantizer>(t));
    types_ = std::move(types);
}

std::string_view GgufMixQuantizer::description() const {
    if (gptq_)
        return "GGUF experts in the types the gguf format chose per tensor, their codes chosen by GPTQ on calibration "
               "inputs within ggml's importance-weighted scales (convert --calibrate --gptq)";
    return "GGUF experts in the types the gguf format chose per tensor (llama-quantize's presets and --tensor-type), "
           "each byte for byte as ggml quantizes";
}

Options GgufMixQuantizer::facts() const {
    Options facts;
    facts.set("gguf.mixture", "true");  // the format names the types per tensor
    if (gptq_) facts.set("verify.reference", "gguf");  // GPTQ's output error must beat plain rounding's
    return facts;
}

Options GgufMixQuantizer::settings() const {
    Options settings;
    if (!expert_types_.empty()) settings.set(std::string(types_key), expert_types_);
    if (carry_mxfp4_) settings.set(std::string(carry_key), "mxfp4");
    if (gptq_) {
        settings.set("calibration", "gptq");
        settings.set("actorder", settings_.actorder ? "static" : "none");
        settings.set("dampening_frac", std::to_string(settings_.dampening_frac));
    }
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
    if (gptq_) {
        mix->settings_ = gptq::configure_fixed_scale(settings_, options, id());
        auto variants = std::make_shared<std::vector<std::unique_ptr<GgufGptqQuantizer>>>();
        for (const auto& q : *types_) variants->push_back(std::make_unique<GgufGptqQuantizer>(*q, mix->settings_));
        mix->gptq_types_ = std::move(variants);
    }
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
        if (gptq_)
            throw Error(ErrorKind::usage, "gguf-gptq chooses codes on calibration inputs, and an MXFP4 source's experts keep their stored codes",
                        {.hint = "leave out --gptq (--calibrate alone measures an importance matrix), or pick a preset that requantizes"});
        const GgmlType* mxfp4 = ggml_type_named("mxfp4");
        for (const auto& q : *types_)
            if (&q->type() == mxfp4) mix->carried_ = std::make_shared<CarriedMxfp4Quantizer>(*q);
        mix->carry_mxfp4_ = true;
    }
    return mix;
}

const Quantizer* GgufMixQuantizer::for_matrix(const MatrixRole& role) const {
    const auto it = layers_.find(role.layer);
    if (it == layers_.end()) return nullptr;  // the mixture itself then refuses, naming the layer
    const GgmlQuantizer* chosen = it->second[static_cast<std::size_t>(role.projection)];
    // An MXFP4 tensor of an MXFP4 source keeps the stored codes; the others quantize decoded values.
    if (carry_mxfp4_ && chosen->type().name == "mxfp4") return carried_.get();
    if (gptq_types_)
        for (std::size_t t = 0; t < types_->size(); ++t)
            if ((*types_)[t].get() == chosen) return (*gptq_types_)[t].get();
    return chosen;
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

std::shared_ptr<const PreparedCalibration> GgufMixQuantizer::prepare_calibration(const Tensor& hessian) const {
    return gptq::prepare_fixed_scale(hessian, gptq::fixed_scale_scheme(4, settings_));
}

QuantizedTensor GgufMixQuantizer::quantize_calibrated(const TensorView& weight, const PreparedCalibration&) const {
    output_layout(weight.shape);
    return {};
}

std::shared_ptr<const Quantizer> GgufMixQuantizer::bind_source(const Checkpoint& checkpoint, const ExpertWeightSource& source) const {
    carried_->bind_source(checkpoint, source);
    return std::make_shared<GgufMixQuantizer>(*this);
}

QuantizedTensor GgufMixQuantizer::carry(const Checkpoint& checkpoint, const ExpertWeightSource& source) const {
    return carried_->carry(checkpoint, source);
}

}  // namespace moequant::ggml_quants
