#include <moequant/engine/hybrid_experts.hpp>
#include <moequant/error.hpp>
#include <moequant/input_file.hpp>

#include <boost/json.hpp>

namespace moequant {

namespace json = boost::json;

GpuPlacement read_gpu_placement(const std::filesystem::path& file, const ModelPlan& plan) {
    const std::string text = read_small_file(file, json_file_limit);
    auto bad = [&](const std::string& why) {
        return Error(ErrorKind::input, why, {.file = file.string(), .code = "BadPlacement",
                                             .hint = "write it with moequant plan --output for this model"});
    };
    json::value doc;
    try {
        doc = json::parse(text);
    } catch (const std::exception& e) {
        throw bad(std::string("is not JSON: ") + e.what());
    }
    const json::object* root = doc.if_object();
    const json::value* layers = root ? root->if_contains("layers") : nullptr;
    if (!layers || !layers->is_array()) throw bad("has no 'layers' list (moequant plan's placement JSON)");
    GpuPlacement placement;
    for (const json::value& entry : layers->as_array()) {
        const json::object* o = entry.if_object();
        const json::value* layer = o ? o->if_contains("layer") : nullptr;
        const json::value* mask = o ? o->if_contains("gpu_experts_mask") : nullptr;
        if (!layer || !layer->is_int64() || !mask || !mask->is_array())
            throw bad("has a layer entry without an integer 'layer' and a 'gpu_experts_mask' list");
        const std::int64_t index = layer->as_int64();
        const MoeLayerPlan* moe = plan.moe_layer(index);
        if (!moe) throw bad("places experts of layer " + std::to_string(index) + ", which has no routed experts in this model");
        if (placement.count(index)) throw bad("lists layer " + std::to_string(index) + " twice");
        if (mask->as_array().size() != static_cast<std::size_t>(plan.num_experts))
            throw bad("layer " + std::to_string(index) + "'s gpu_experts_mask has " + std::to_string(mask->as_array().size()) +
                      " entries, the model has " + std::to_string(plan.num_experts) + " experts per layer");
        std::vector<bool>& gpu = placement[index];
        for (const json::value& m : mask->as_array()) {
            if (!m.is_bool()) throw bad("layer " + std::to_string(index) + "'s gpu_experts_mask holds a value that is not true/false");
            gpu.push_back(m.as_bool());
        }
    }
    return placement;
}

HybridExperts::HybridExperts(const QuantizedExperts& cpu, const QuantizedExperts& gpu, const ModelPlan& plan,
                             GpuPlacement placement)
    : cpu_(cpu), gpu_(gpu), plan_(plan), placement_(std::move(placement)) {}

ExpertMatrices HybridExperts::layer(std::int64_t layer) const {
    const auto on_gpu = placement_.find(layer);
    if (on_gpu == placement_.end()) return cpu_.layer(layer);
    const MoeLayerPlan* moe = plan_.moe_layer(layer);
    if (!moe) throw Error(ErrorKind::internal, "layer " + std::to_string(layer) + " has no routed experts");
    return [cpu = cpu_.layer(layer), gpu = gpu_.layer(layer), moe, &mask = on_gpu->second](std::int64_t expert,
                                                                                           Projection projection) {
        const std::int64_t id = moe->experts.at(static_cast<std::size_t>(expert)).expert;
        return mask.at(static_cast<std::size_t>(id)) ? gpu(expert, projection) : cpu(expert, projection);
    };
}

std::int64_t HybridExperts::gpu_experts() const noexcept {
    std::int64_t n = 0;
    for (const auto& [layer, mask] : placement_)
        for (bool g : mask) n += g;
    return n;
}

}  // namespace moequant
