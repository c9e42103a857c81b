#include "gptq_config.hpp"

#include "encoding_rules.hpp"

#include <moequant/error.hpp>

#include <cmath>
#include <filesystem>
#include <optional>

namespace moequant::encodings {
namespace {

// A whole number, or nullopt when the value is another type or has a fraction.
std::optional<std::int64_t> whole_number(const ConfigValue& v) {
    if (!v.is_number()) return std::nullopt;
    const double d = v.as_double();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 1e15) return std::nullopt;
    return v.as_int();
}

bool bool_member(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& qweight, const ConfigValue& q,
                 std::string_view key, bool fallback) {
    auto v = q.get(key);
    if (!v || v->is_null()) return fallback;
    if (!v->is_bool())
        refuse_config(checkpoint, config, qweight, "'" + v->path() + "' must be true or false, got " + v->to_json(),
                      "InvalidConfig");
    return v->as_bool();
}

// GPTQModel writes the packing under `format` and (deprecated) `checkpoint_format`, AutoGPTQ and
// transformers under `checkpoint_format`; both must agree when both are there.
GptqZeros zero_convention(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& qweight,
                          const ConfigValue& q) {
    std::optional<ConfigValue> chosen;
    for (const char* key : {"checkpoint_format", "format"}) {
        auto v = q.get(key);
        if (!v || v->is_null()) continue;
        if (!v->is_string())
            refuse_config(checkpoint, config, qweight, "'" + v->path() + "' must be a string, got " + v->to_json(),
                          "InvalidConfig");
        if (chosen && chosen->as_string() != v->as_string())
            refuse_config(checkpoint, config, qweight,
                          "'" + chosen->path() + "' is " + chosen->to_json() + " but '" + v->path() + "' is " + v->to_json(),
                          "InvalidConfig", "the two keys name the same packing; make them agree");
        if (!chosen) chosen = v;
    }
    if (!chosen || chosen->as_string() == "gptq") return GptqZeros::v1;
    if (chosen->as_string() == "gptq_v2") return GptqZeros::v2;
    refuse_config(checkpoint, config, qweight,
                  "is GPTQ in the '" + chosen->as_string() + "' packing ('" + chosen->path() +
                      "'); moequant decodes only the 'gptq' (v1) and 'gptq_v2' packings",
                  "UnsupportedEncoding", "re-export the checkpoint in the gptq or gptq_v2 format");
}

// GPTQModel's `dynamic` maps module-name patterns to per-module settings ("-:" patterns skip a
// module, which then stays a plain weight). An override of bits or group size would change how
// some weights are packed, and moequant does not match Python regular expressions.
void refuse_overrides(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& qweight,
                      const ConfigValue& q, std::int64_t group_size) {
    auto dynamic = q.get("dynamic");
    if (!dynamic || !dynamic->is_object()) return;
    for (const auto& pattern : dynamic->keys()) {
        if (pattern.starts_with("-:")) continue;
        auto settings = dynamic->get(pattern);
        if (!settings || !settings->is_object()) continue;
        for (const char* key : {"bits", "group_size"}) {
            auto v = settings->get(key);
            if (!v) continue;
            const auto n = whole_number(*v);
            if (n && *n == (std::string_view(key) == "bits" ? 4 : group_size)) continue;
            refuse_config(checkpoint, config, qweight,
                          "'" + v->path() + "' overrides " + key + " for modules matching '" + pattern +
                              "'; moequant decodes only checkpoints with one bits and group size",
                          "UnsupportedEncoding");
        }
    }
}

}  // namespace

GptqConfig gptq_config(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& qweight) {
    const auto q = quantization_config(config);
    if (!q) {
        // Old AutoGPTQ exports keep the settings in a side file. It is not read: the run manifest
        // fingerprints config.json and the shards only, so a side file could change unnoticed.
        const bool side_file = std::filesystem::exists(checkpoint.directory() / "quantize_config.json");
        refuse_config(checkpoint, config, qweight,
                      "holds GPTQ-style packed words, but config.json has no quantization_config (bits, group size "
                      "and the zero-point convention are unknown)",
                      "MissingConfig",
                      side_file ? "this folder has an AutoGPTQ quantize_config.json: copy its object into config.json as "
                                  "\"quantization_config\" (with \"quant_method\": \"gptq\")"
                                : "add the quantization_config the checkpoint was made with to config.json");
    }
    std::string method = string_member(*q, "quant_method");
    if (method.empty()) method = string_member(*q, "method");  // GPTQModel's newer spelling
    if (method != "gptq")
        refuse_config(checkpoint, config, qweight,
                      "holds GPTQ-style packed words, but quantization_config.quant_method is " +
                          (method.empty() ? std::string("missing") : "'" + method + "'") + ", not 'gptq'",
                      method.empty() ? "MissingConfig" : "UnsupportedEncoding");

    auto bits = q->get("bits");
    if (!bits) refuse_config(checkpoint, config, qweight, "quantization_config has no 'bits'", "MissingConfig");
    const auto bit_count = whole_number(*bits);
    if (!bit_count)
        refuse_config(checkpoint, config, qweight, "'" + bits->path() + "' must be a whole number, got " + bits->to_json(),
                      "InvalidConfig");
    if (*bit_count != 4)
        refuse_config(checkpoint, config, qweight,
                      "is " + std::to_string(*bit_count) + "-bit GPTQ ('" + bits->path() +
                          "'); moequant decodes only 4-bit GPTQ",
                      "UnsupportedEncoding");

    GptqConfig out;
    auto group = q->get("group_size");
    if (!group || group->is_null())
        refuse_config(checkpoint, config, qweight,
                      "quantization_config has no 'group_size'; moequant does not guess it from the scales' shape",
                      "MissingGroupSize", "add the group_size the checkpoint was quantized with (-1 for one group per row)");
    const auto group_size = whole_number(*group);
    if (!group_size || (*group_size != -1 && *group_size < 1))
        refuse_config(checkpoint, config, qweight,
                      "'" + group->path() + "' must be -1 or a positive whole number, got " + group->to_json(),
                      "InvalidConfig");
    out.group_size = *group_size;
    out.desc_act = bool_member(checkpoint, config, qweight, *q, "desc_act", false);
    out.sym = bool_member(checkpoint, config, qweight, *q, "sym", true);
    if (bool_member(checkpoint, config, qweight, *q, "is_marlin_format", false))
        refuse_config(checkpoint, config, qweight, "is GPTQ in AutoGPTQ's Marlin packing ('is_marlin_format')",
                      "UnsupportedEncoding", "re-export the checkpoint in the gptq or gptq_v2 format");
    out.zeros = zero_convention(checkpoint, config, qweight, *q);
    if (const std::string pack = string_member(*q, "pack_dtype"); !pack.empty() && pack != "int32")
        refuse_config(checkpoint, config, qweight,
                      "packs GPTQ codes in " + pack + " words (quantization_config.pack_dtype); moequant reads int32 words",
                      "UnsupportedEncoding");
    refuse_overrides(checkpoint, config, qweight, *q, out.group_size);
    return out;
}

}  // namespace moequant::encodings
