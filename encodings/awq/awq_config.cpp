#include "awq_config.hpp"

#include "encoding_rules.hpp"

#include <moequant/error.hpp>

#include <cmath>
#include <optional>

namespace moequant::encodings {
namespace {

// The first of `keys` present (transformers spells them bits / group_size, AutoAWQ w_bit /
// q_group_size), as a whole number; nullopt when none is there.
std::optional<std::int64_t> whole_member(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& qweight,
                                         const ConfigValue& q, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
        auto v = q.get(key);
        if (!v || v->is_null()) continue;
        if (!v->is_number() || !std::isfinite(v->as_double()) || v->as_double() != std::floor(v->as_double()) ||
            std::fabs(v->as_double()) > 1e15)
            refuse_config(checkpoint, config, qweight, "'" + v->path() + "' must be a whole number, got " + v->to_json(),
                          "InvalidConfig");
        return v->as_int();
    }
    return std::nullopt;
}

}  // namespace

AwqConfig awq_config(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& qweight) {
    const auto q = quantization_config(config);
    if (!q || quant_method(config) != "awq")
        refuse_config(checkpoint, config, qweight, "holds AWQ-style packed words, but quantization_config does not name AWQ",
                      "MissingConfig");
    const auto bits = whole_member(checkpoint, config, qweight, *q, {"bits", "w_bit"});
    if (!bits) refuse_config(checkpoint, config, qweight, "quantization_config has no 'bits' (or 'w_bit')", "MissingConfig");
    if (*bits != 4)
        refuse_config(checkpoint, config, qweight, "is " + std::to_string(*bits) + "-bit AWQ; moequant decodes only 4-bit AWQ",
                      "UnsupportedEncoding");
    const auto group = whole_member(checkpoint, config, qweight, *q, {"group_size", "q_group_size"});
    if (!group)
        refuse_config(checkpoint, config, qweight,
                      "quantization_config has no 'group_size' (or 'q_group_size'); moequant does not guess it from the scales' shape",
                      "MissingGroupSize");
    if (*group < 1)
        refuse_config(checkpoint, config, qweight, "AWQ group_size must be a positive whole number, got " + std::to_string(*group),
                      "InvalidConfig");
    if (auto zero_point = q->get("zero_point"); zero_point && zero_point->is_bool() && !zero_point->as_bool())
        refuse_config(checkpoint, config, qweight,
                      "is AWQ without zero points ('" + zero_point->path() + "' false); moequant reads zero-point AWQ",
                      "UnsupportedEncoding");
    const std::string version = lower_case(string_member(*q, "version"));
    if (!version.empty() && version != "gemm")
        refuse_config(checkpoint, config, qweight,
                      "is AWQ in the '" + version + "' packing (quantization_config.version); moequant reads the GEMM packing",
                      "UnsupportedEncoding", "re-export the checkpoint with AutoAWQ's GEMM version");
    return {.group_size = *group};
}

}  // namespace moequant::encodings
