// AutoGPTQ / GPTQModel "gptq" INT4 weights (model-families-2026.md §2.4, docs/encodings-gptq.md):
// per Linear P, P.qweight I32 [K/8, N] packed along K, P.qzeros I32 [G, N/8] packed along N,
// P.scales [G, N] and an optional P.g_idx I32 [K], standing for the nn.Linear weight
// P.weight [N, K]. Recognised from the headers and quantization_config only; g_idx is read
// (and validated) at decode.
#include "encoding_rules.hpp"
#include "gptq_config.hpp"
#include "gptq_decode.hpp"
#include "gptq_layout.hpp"

#include <moequant/plugin.hpp>

namespace moequant::encodings {
namespace {

class GptqEncoding final : public SourceEncoding {
public:
    std::string_view id() const override { return "gptq"; }
    std::string_view description() const override {
        return "AutoGPTQ/GPTQModel 4-bit GPTQ (qweight, qzeros v1/v2, F16/BF16/F32 scales, act-order g_idx)";
    }
    std::vector<std::string> input_types() const override { return {"int4"}; }

    // Only the four GPTQ suffixes; a 1-D `.scales` or a `.g_idx` of another kind is someone else's.
    std::optional<std::string> weight_of(const TensorInfo& tensor) const override {
        for (const char* suffix : {".qweight", ".qzeros"})
            if (auto stem = strip_suffix(tensor.name, suffix)) return *stem + ".weight";
        if (tensor.shape.size() == 2)
            if (auto stem = strip_suffix(tensor.name, ".scales")) return *stem + ".weight";
        if (tensor.shape.size() == 1 && tensor.dtype == DType::I32)
            if (auto stem = strip_suffix(tensor.name, ".g_idx")) return *stem + ".weight";
        return std::nullopt;
    }

    int recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig* config,
                  EncodedWeight& out) const override {
        const auto stem = strip_suffix(name, ".weight");
        if (!stem || !checkpoint.contains(*stem + ".qweight")) return 0;
        if (quant_method(config) == "awq") return 0;  // AWQ's words share the names; the awq encoding reads them
        const std::string qweight = *stem + ".qweight";
        if (checkpoint.contains(name))
            refuse(checkpoint, std::string(name), "is stored both as a plain tensor and as GPTQ packed words (" + qweight + ")",
                   "AmbiguousEncoding", "remove one of the two from the checkpoint");
        const GptqConfig cfg = gptq_config(checkpoint, config, qweight);
        const GptqLayout layout = gptq_layout(checkpoint, *stem, cfg);
        const bool act_order = cfg.desc_act && layout.g_idx;
        out.shape = {layout.out_features, layout.in_features};
        out.input_type = "int4";
        out.tensors = {{"packed", layout.qweight}, {"zeros", layout.qzeros}, {"scale", layout.scales}};
        if (layout.g_idx) out.tensors.emplace_back("g_idx", *layout.g_idx);
        const std::string zeros = cfg.zeros == GptqZeros::v1 ? "v1" : "v2";
        out.parameters.set("bits", "4");
        out.parameters.set("group", std::to_string(layout.group));
        out.parameters.set("zeros", zeros);
        out.parameters.set("act_order", act_order ? "true" : "false");
        out.parameters.set("sym", cfg.sym ? "true" : "false");
        out.parameters.set("scale_dtype", std::string(dtype_name(layout.scale_dtype)));
        out.summary = "GPTQ INT4, group " + std::to_string(layout.group) + (cfg.group_size == -1 ? " (one per row)" : "") +
                      ", " + std::string(dtype_name(layout.scale_dtype)) + " scales, " + zeros + " zeros" +
                      (act_order ? ", act-order" : "");
        return 20;
    }

    void decode(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out) const override {
        decode_gptq(checkpoint, w, window, target, out);
    }
};

}  // namespace
}  // namespace moequant::encodings

MOEQUANT_PLUGIN("autogptq", "1.0.0", MOEQUANT_KIND_ENCODING, "AutoGPTQ/GPTQModel 4-bit GPTQ weights") {
    registrar.add(std::make_unique<moequant::encodings::GptqEncoding>());
}
