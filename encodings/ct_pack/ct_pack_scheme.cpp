#include "ct_pack_scheme.hpp"

#include "encoding_rules.hpp"

#include <regex>
#include <vector>

namespace moequant::encodings {
namespace {

// A target is a module name, "re:<regex>" over module names, or a class name ("Linear"); a
// class target applies to every quantized Linear (all modules whose weights are packed).
enum class TargetFit { none, by_class, by_name };

TargetFit fit(const ConfigValue& targets, const std::string& module) {
    TargetFit best = TargetFit::none;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const ConfigValue t = targets.at(i);
        if (!t.is_string()) continue;
        const std::string s = t.as_string();
        if (s.rfind("re:", 0) == 0) {
            try {
                if (std::regex_match(module, std::regex(s.substr(3)))) return TargetFit::by_name;
            } catch (const std::regex_error&) {
                throw Error(ErrorKind::input, "'" + t.path() + "' is not a valid regular expression: " + s,
                            {.code = "InvalidConfig"});
            }
        } else if (s == module) {
            return TargetFit::by_name;
        } else if (s.find('.') == std::string::npos) {
            best = TargetFit::by_class;
        }
    }
    return best;
}

}  // namespace

std::optional<PackScheme> pack_scheme(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& module,
                                      const std::string& tensor) {
    auto q = quantization_config(config);
    if (!q || string_member(*q, "quant_method") != "compressed-tensors") return std::nullopt;
    auto groups = q->get("config_groups");
    if (!groups || !groups->is_object())
        refuse(checkpoint, tensor, "is compressed-tensors packed, but quantization_config has no config_groups",
               "InvalidConfig");
    // The group that names the module wins over class-only targets; two candidates of the same
    // kind cannot be told apart from the config alone.
    std::vector<std::string> by_name, by_class;
    for (const auto& key : groups->keys()) {
        auto g = groups->get(key);
        auto targets = g ? g->get("targets") : std::nullopt;
        if (!targets || !targets->is_array()) continue;
        const TargetFit f = fit(*targets, module);
        if (f == TargetFit::by_name) by_name.push_back(key);
        if (f == TargetFit::by_class) by_class.push_back(key);
    }
    const auto& chosen = by_name.empty() ? by_class : by_name;
    if (chosen.empty())
        refuse(checkpoint, tensor, "is compressed-tensors packed, but no config group targets module '" + module + "'",
               "InvalidConfig");
    if (chosen.size() > 1)
        refuse(checkpoint, tensor,
               "is compressed-tensors packed, and config groups " + chosen[0] + " and " + chosen[1] +
                   " both apply to it; refusing to guess which scheme wrote it",
               "AmbiguousEncoding");
    auto group = groups->get(chosen.front());
    const std::string format = string_member(*group, "format").empty() ? string_member(*q, "format") : string_member(*group, "format");
    if (format != "pack-quantized") return std::nullopt;  // another plugin's format (mxfp4-pack-quantized, ...)
    auto w = group->get("weights");
    if (!w || !w->is_object()) refuse(checkpoint, tensor, "config group " + chosen.front() + " has no weights arguments", "InvalidConfig");
    auto member = [&](std::string_view key) { return w->get(key); };
    PackScheme s;
    auto bits = member("num_bits");
    s.bits = bits && bits->is_number() ? static_cast<int>(bits->as_int()) : 0;
    if (s.bits != 4 && s.bits != 8)
        refuse(checkpoint, tensor, "is packed with num_bits " + (bits ? bits->to_json() : std::string("(missing)")) +
                                       "; moequant reads 4- and 8-bit compressed-tensors weights",
               "UnsupportedEncoding");
    if (string_member(*w, "type") != "int")
        refuse(checkpoint, tensor, "is packed with weights type '" + string_member(*w, "type") + "', not int", "UnsupportedEncoding");
    if (auto sym = member("symmetric"); !sym || !sym->is_bool() || !sym->as_bool())
        refuse(checkpoint, tensor, "is packed asymmetrically (zero points), which moequant does not read as a source",
               "UnsupportedEncoding", "the zero-point packing of asymmetric compressed-tensors weights is not documented in the spec");
    if (auto dyn = member("dynamic"); dyn && dyn->is_bool() && dyn->as_bool())
        refuse(checkpoint, tensor, "has dynamic weight quantization, which stores no scales", "UnsupportedEncoding");
    const std::string strategy = string_member(*w, "strategy");
    if (strategy == "group") {
        auto gs = member("group_size");
        s.group_size = gs && gs->is_number() ? gs->as_int() : 0;
        if (s.group_size <= 0)
            refuse(checkpoint, tensor, "uses the group strategy without a positive group_size", "InvalidConfig");
    } else if (strategy == "channel") {
        s.group = false;
    } else {
        refuse(checkpoint, tensor, "is packed with strategy '" + strategy + "'; moequant reads group and channel", "UnsupportedEncoding");
    }
    s.actorder = string_member(*w, "actorder");
    return s;
}

}  // namespace moequant::encodings
