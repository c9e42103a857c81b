#include "mxfp4_compressed_tensors.hpp"

#include "encoding_rules.hpp"
#include "mxfp4_rows.hpp"

namespace moequant::encodings {
namespace {

constexpr std::string_view mxfp4_format = "mxfp4-pack-quantized";

// The format named at the top or by a config group, or a group of 4-bit floats in blocks of 32.
bool announced(const ConfigValue& q) {
    if (string_member(q, "quant_method") != "compressed-tensors") return false;
    if (string_member(q, "format") == mxfp4_format) return true;
    auto groups = q.get("config_groups");
    if (!groups || !groups->is_object()) return false;
    auto is = [](const std::optional<ConfigValue>& v, std::int64_t n) {
        return v && v->is_number() && v->as_double() == static_cast<double>(n);
    };
    for (const auto& key : groups->keys()) {
        auto group = groups->get(key);
        if (!group || !group->is_object()) continue;
        if (string_member(*group, "format") == mxfp4_format) return true;
        auto w = group->get("weights");
        if (w && w->is_object() && string_member(*w, "type") == "float" && is(w->get("num_bits"), 4) &&
            is(w->get("group_size"), mxfp4_block))
            return true;
    }
    return false;
}

}  // namespace

void refuse_compressed_tensors_mxfp4(std::string_view name, const Checkpoint& checkpoint, const ModelConfig* config) {
    const auto stem = strip_suffix(name, ".weight");
    if (!stem || !checkpoint.contains(*stem + ".weight_packed")) return;
    const TensorInfo& packed = checkpoint.info(*stem + ".weight_packed");
    if (packed.dtype != DType::U8 || packed.shape.size() != 2) return;
    bool group_32_byte_scales = false;
    if (const std::string scale_name = *stem + ".weight_scale"; checkpoint.contains(scale_name)) {
        const TensorInfo& scale = checkpoint.info(scale_name);
        group_32_byte_scales = (scale.dtype == DType::U8 || scale.dtype == DType::F8_E8M0) && scale.shape.size() == 2 &&
                               scale.shape[0] == packed.shape[0] && packed.shape[1] % (mxfp4_block / 2) == 0 &&
                               scale.shape[1] == packed.shape[1] / (mxfp4_block / 2);
    }
    const auto q = quantization_config(config);
    if (!group_32_byte_scales && !(q && announced(*q))) return;
    const std::string version = q ? string_member(*q, "version") : std::string();
    refuse(checkpoint, packed.name,
           "is compressed-tensors " + std::string(mxfp4_format) +
               (version.empty() ? std::string() : " (compressed-tensors " + version + ")") +
               ": its E8M0 scale bytes carry an exponent bias of 127 or 125 depending on the compressed-tensors "
               "version that wrote the file, which the file does not record, and a wrong guess scales every weight by 4",
           "UnsupportedEncoding", "convert from the model's BF16 release or an original MXFP4 (gpt-oss, DeepSeek-V4) checkpoint");
}

}  // namespace moequant::encodings
