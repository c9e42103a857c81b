#include "gguf_rope_keys.hpp"

#include <moequant/error.hpp>

namespace moequant::formats {
namespace {

// The first of `names` the config has (find_hparam).
std::optional<ConfigValue> first_of(const ModelConfig& config, std::initializer_list<const char*> names) {
    for (const char* name : names)
        if (auto v = config.find(name); v && !v->is_null()) return v;
    return std::nullopt;
}

// The rope parameter object the converter reads, when the config has one.
std::optional<ConfigValue> parameter_object(const ModelConfig& config) {
    auto object = first_of(config, {"rope_parameters"});
    if (!object || !object->is_object()) object = first_of(config, {"rope_scaling"});
    if (!object || !object->is_object()) return std::nullopt;
    if (auto full = object->get("full_attention"); full && full->is_object()) return full;
    return object;
}

// rope_params[name], with the config's global values mirrored in where the object lacks them
// (only where there is no full/sliding split, as the converter mirrors).
std::optional<ConfigValue> resolved(const ModelConfig& config, std::string_view name) {
    const auto object = parameter_object(config);
    if (object)
        if (auto v = object->get(name); v && !v->is_null()) return v;
    const auto top = first_of(config, {"rope_parameters"});
    const bool split = top && top->is_object() && (top->get("full_attention") || top->get("sliding_attention"));
    if (split) return std::nullopt;
    if (name == "rope_theta") return first_of(config, {"global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base"});
    if (name == "rope_type" && object) return object->get("type");
    if (name == "partial_rotary_factor") return first_of(config, {"partial_rotary_factor", "rope_pct", "rope_percent"});
    if (name == "original_max_position_embeddings") return first_of(config, {"original_max_position_embeddings"});
    return std::nullopt;
}

}  // namespace

std::optional<double> rope_parameter(const ModelConfig& config, const std::string& name) {
    if (auto v = resolved(config, name); v && v->is_number()) return v->as_double();
    return std::nullopt;
}

void add_rope_keys(const std::string& arch, const ModelConfig& config, std::vector<GgufKeyValue>& kv) {
    auto key = [&](const char* name) { return arch + ".rope." + name; };
    auto add_f32 = [&](const char* name, const char* parameter) {
        if (auto v = rope_parameter(config, parameter)) kv.push_back({key(name), GgufValue::f32(static_cast<float>(*v))});
    };
    auto refuse = [&](const std::string& why) {
        throw Error(ErrorKind::input, "has " + why, {.file = config.source(), .code = "UnsupportedGguf"});
    };
    if (auto type = resolved(config, "rope_type"); type && type->is_string()) {
        const std::string name = type->as_string();
        const auto factor = rope_parameter(config, "factor");
        if (name == "linear" && factor) {
            kv.push_back({key("scaling.type"), GgufValue::string("linear")});
            kv.push_back({key("scaling.factor"), GgufValue::f32(static_cast<float>(*factor))});
        } else if (name == "yarn" && factor) {
            const auto original = rope_parameter(config, "original_max_position_embeddings");
            if (!original) refuse("yarn rope scaling without original_max_position_embeddings");
            kv.push_back({key("scaling.type"), GgufValue::string("yarn")});
            kv.push_back({key("scaling.factor"), GgufValue::f32(static_cast<float>(*factor))});
            if (!(*original >= 0 && *original <= 4294967295.0))
                refuse("yarn rope scaling with original_max_position_embeddings " + std::to_string(*original) + ", not a context length");
            kv.push_back({key("scaling.original_context_length"), GgufValue::u32(static_cast<std::uint32_t>(*original))});
            add_f32("scaling.yarn_ext_factor", "extrapolation_factor");
            if (rope_parameter(config, "attention_factor")) add_f32("scaling.yarn_attn_factor", "attention_factor");
            else add_f32("scaling.yarn_attn_factor", "attn_factor");
            add_f32("scaling.yarn_beta_fast", "beta_fast");
            add_f32("scaling.yarn_beta_slow", "beta_slow");
        } else if (name != "default" && name != "mrope" && name != "linear" && name != "yarn") {
            // longrope's factor tensors, llama3's rope_freqs, dynamic NTK: computed by llama.cpp
            // only from what a family's converter adds, which moequant does not write.
            refuse("rope type '" + name + "', which moequant's GGUF output does not map (llama.cpp would compute without it)");
        }
    }
    if (auto object = parameter_object(config); object)
        if (auto sections = object->get("mrope_section"); sections && sections->is_array()) {
            std::vector<std::int32_t> dims;
            for (std::size_t i = 0; i < sections->size(); ++i) dims.push_back(static_cast<std::int32_t>(sections->at(i).as_int()));
            while (dims.size() < 4) dims.push_back(0);
            dims.resize(4);
            kv.push_back({key("dimension_sections"), GgufValue::i32s(dims)});
        }
    add_f32("freq_base", "rope_theta");
    std::optional<ConfigValue> local;
    if (auto top = first_of(config, {"rope_parameters"}); top && top->is_object())
        if (auto sliding = top->get("sliding_attention"); sliding && sliding->is_object()) local = sliding->get("rope_theta");
    if (!local) local = first_of(config, {"local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta", "rope_local_base_freq"});
    if (local && local->is_number()) kv.push_back({key("freq_base_swa"), GgufValue::f32(static_cast<float>(local->as_double()))});
}

}  // namespace moequant::formats
