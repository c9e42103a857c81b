// AutoAWQ "awq" INT4 weights in the GEMM packing (what kt-kernel's convert_cpu_weights.py
// --input-type awq reads; docs/encodings.md): per Linear P, P.qweight I32 [K, N/8] and
// P.qzeros I32 [G, N/8], each word eight output columns in AWQ's interleaved order, and
// P.scales F16 [G, N] (G = ceil(K / group)), standing for the nn.Linear weight P.weight [N, K].
// Recognised from the headers and quantization_config (quant_method "awq").
#include "awq_config.hpp"
#include "awq_decode.hpp"
#include "encoding_rules.hpp"

#include <moequant/checked_math.hpp>
#include <moequant/plugin.hpp>

namespace moequant::encodings {
namespace {

class AwqEncoding final : public SourceEncoding {
public:
    std::string_view id() const override { return "awq"; }
    std::string_view description() const override {
        return "AutoAWQ 4-bit AWQ, GEMM packing (qweight, qzeros, F16/BF16/F32 scales, zero points)";
    }
    std::vector<std::string> input_types() const override { return {"awq"}; }

    std::optional<std::string> weight_of(const TensorInfo& tensor) const override {
        if (tensor.dtype == DType::I32)
            for (const char* suffix : {".qweight", ".qzeros"})
                if (auto stem = strip_suffix(tensor.name, suffix)) return *stem + ".weight";
        if (tensor.shape.size() == 2)
            if (auto stem = strip_suffix(tensor.name, ".scales")) return *stem + ".weight";
        return std::nullopt;
    }

    int recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig* config,
                  EncodedWeight& out) const override {
        const auto stem = strip_suffix(name, ".weight");
        // AWQ's words share GPTQ's names; quantization_config tells them apart.
        if (!stem || !checkpoint.contains(*stem + ".qweight") || quant_method(config) != "awq") return 0;
        const std::string qweight = *stem + ".qweight", qzeros = *stem + ".qzeros", scales = *stem + ".scales";
        if (checkpoint.contains(name))
            refuse(checkpoint, std::string(name), "is stored both as a plain tensor and as AWQ packed words (" + qweight + ")",
                   "AmbiguousEncoding", "remove one of the two from the checkpoint");
        const AwqConfig cfg = awq_config(checkpoint, config, qweight);
        const TensorInfo& packed = checkpoint.info(qweight);
        if (packed.dtype != DType::I32 || packed.shape.size() != 2 || packed.shape[0] < 1 || packed.shape[1] < 1)
            refuse(checkpoint, qweight,
                   "is " + std::string(dtype_name(packed.dtype)) + " " + shape_to_string(packed.shape) +
                       "; AWQ qweight must be a non-empty I32 [K, N/8] matrix of eight 4-bit codes a word",
                   "ShapeMismatch");
        const std::int64_t k = packed.shape[0];
        const std::int64_t n = checked_mul<std::int64_t>(packed.shape[1], 8, "AWQ out-features (8 x qweight columns)",
                                                         {.file = file_of(checkpoint, qweight), .tensor = qweight});
        checked_mul<std::int64_t>(k, n, "AWQ weight elements", {.file = file_of(checkpoint, qweight), .tensor = qweight});
        const std::int64_t groups = k / cfg.group_size + (k % cfg.group_size != 0);
        const std::string why = "K = " + std::to_string(k) + " input features, group_size " + std::to_string(cfg.group_size) + ", " +
                                std::to_string(groups) + " groups";
        if (!checkpoint.contains(scales))
            refuse(checkpoint, qweight, "is AWQ packed words, but its scale tensor " + scales + " is missing", "MissingScale");
        const DType scale_dtype = checkpoint.info(scales).dtype;
        if (scale_dtype != DType::F16 && scale_dtype != DType::BF16 && scale_dtype != DType::F32)
            refuse(checkpoint, scales, "has dtype " + std::string(dtype_name(scale_dtype)) + "; AWQ scales must be F16, BF16 or F32",
                   "UnsupportedDtype");
        expect_shape(checkpoint, scales, {groups, n}, qweight, why);
        if (!checkpoint.contains(qzeros))
            refuse(checkpoint, qweight, "is AWQ packed words, but its zero-point tensor " + qzeros + " is missing", "MissingZeros");
        if (checkpoint.info(qzeros).dtype != DType::I32)
            refuse(checkpoint, qzeros, "is " + std::string(dtype_name(checkpoint.info(qzeros).dtype)) +
                                           "; AWQ qzeros must be I32 words of eight 4-bit zero points",
                   "UnsupportedDtype");
        expect_shape(checkpoint, qzeros, {groups, n / 8}, qweight, why);

        out.shape = {n, k};
        out.input_type = "awq";
        out.tensors = {{"packed", qweight}, {"zeros", qzeros}, {"scale", scales}};
        out.parameters.set("bits", "4");
        out.parameters.set("group", std::to_string(cfg.group_size));
        out.parameters.set("scale_dtype", std::string(dtype_name(scale_dtype)));
        out.summary = "AWQ INT4 (GEMM), group " + std::to_string(cfg.group_size) + ", " + std::string(dtype_name(scale_dtype)) +
                      " scales, zero points";
        return 20;
    }

    void decode(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out) const override {
        decode_awq(checkpoint, w, window, target, out);
    }
};

}  // namespace
}  // namespace moequant::encodings

MOEQUANT_PLUGIN("awq", "1.0.0", MOEQUANT_KIND_ENCODING, "AutoAWQ 4-bit AWQ weights (GEMM packing)") {
    registrar.add(std::make_unique<moequant::encodings::AwqEncoding>());
}
