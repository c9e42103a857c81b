#include "quantization_config.hpp"

#include "copied_tensors.hpp"

#include <algorithm>
#include <map>

namespace moequant::formats {

namespace json = boost::json;

std::vector<std::string> ignored_modules(const ModelPlan& plan, const Checkpoint& source,
                                         const std::vector<std::string>& unquantized_experts) {
    constexpr int expert_rank = 2;
    auto rank = [](TensorRole role) {
        switch (role) {
            case TensorRole::attention: return 0;
            case TensorRole::dense_mlp: return 1;
            case TensorRole::router: return 3;
            case TensorRole::shared_expert_gate: return 4;
            case TensorRole::shared_expert: return 5;
            case TensorRole::lm_head: return 6;
            // A VLM's vision tower and projector (copied unchanged) hold Linears too: vLLM would
            // load an unlisted one as quantized (gptq-compressed-tensors.md §7: every unquantized
            // Linear is listed).
            case TensorRole::other: return 7;
            default: return -1;
        }
    };
    // (layer, rank) -> module names in plan order; lm_head last, vision modules first.
    std::map<std::pair<std::int64_t, int>, std::vector<std::string>> groups;
    for (const auto& name : unquantized_experts) groups[{layer_of(name), expert_rank}].push_back(name);
    for (const auto& [name, role] : plan.roles) {
        const int r = rank(role);
        if (r < 0) continue;
        // The module's weight as the copy stores it (an encoded `x.qweight` is copied as `x.weight`).
        const auto copied = copied_name(source, name);
        if (!copied || !copied->ends_with(".weight") || copied_spec(source, *copied).shape.size() != 2) continue;
        std::int64_t layer = layer_of(*copied);
        // Outside the decoder layers: lm_head last; vision modules first, as VLMs register them
        // before the language model.
        if (layer < 0) layer = role == TensorRole::other ? -1 : std::numeric_limits<std::int64_t>::max();
        groups[{layer, r}].push_back(copied->substr(0, copied->size() - 7));
    }
    std::vector<std::string> out;
    for (const auto& [key, names] : groups) out.insert(out.end(), names.begin(), names.end());
    return out;
}

json::object quantization_config(const Options& settings, const std::vector<std::string>& ignore) {
    json::object weights;
    const auto actorder = settings.get("actorder");
    weights["actorder"] = actorder ? json::value(*actorder) : json::value(nullptr);
    weights["block_structure"] = nullptr;
    weights["dynamic"] = false;
    const auto group = settings.get("group_size");
    weights["group_size"] = group ? json::value(std::stoll(*group)) : json::value(nullptr);
    weights["num_bits"] = settings.get_int("num_bits", 4);
    weights["observer"] = "memoryless_minmax";
    weights["observer_kwargs"] = json::object();
    weights["scale_dtype"] = nullptr;
    weights["strategy"] = settings.get_string("strategy", "group");
    weights["symmetric"] = true;
    weights["type"] = "int";
    weights["zp_dtype"] = nullptr;

    json::object group0;
    group0["format"] = "pack-quantized";
    group0["input_activations"] = nullptr;
    group0["output_activations"] = nullptr;
    group0["targets"] = json::array{"Linear"};
    group0["weights"] = std::move(weights);

    json::object config;
    config["config_groups"] = json::object{{"group_0", std::move(group0)}};
    config["format"] = "pack-quantized";
    config["global_compression_ratio"] = nullptr;
    json::array names;
    for (const auto& n : ignore) names.emplace_back(n);
    config["ignore"] = std::move(names);
    config["kv_cache_scheme"] = nullptr;
    config["quant_method"] = "compressed-tensors";
    config["quantization_status"] = "compressed";
    config["sparsity_config"] = json::object();
    config["transform_config"] = json::object();
    config["version"] = compressed_tensors_version;
    return config;
}

}  // namespace moequant::formats
