#include "plan_builder.hpp"

#include "config_counts.hpp"

#include "tensor_roles.hpp"

#include <moequant/checked_math.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_set>

namespace moequant::adapters {
namespace {

std::string dims(std::int64_t a, std::int64_t b) { return shape_to_string({a, b}); }

class PlanBuilder {
public:
    PlanBuilder(const FamilyRules& rules, const ModelConfig& config, const Checkpoint& checkpoint)
        : rules_(rules), config_(config), checkpoint_(checkpoint) {}

    ModelPlan build() {
        read_config();
        find_layer_prefix();
        check_layer_count();
        moe_layer_.assign(static_cast<std::size_t>(plan_.num_hidden_layers), false);
        for (std::int64_t layer = 0; layer < plan_.num_hidden_layers; ++layer)
            moe_layer_[static_cast<std::size_t>(layer)] = rules_.is_moe_layer(config_, layer);
        for (std::int64_t layer = 0; layer < plan_.num_hidden_layers; ++layer)
            if (moe_layer_[static_cast<std::size_t>(layer)]) plan_layer(layer);
        if (plan_.moe_layers.empty())
            config_error("the config describes no MoE layer among its " + std::to_string(plan_.num_hidden_layers) +
                         " decoder layers");
        assign_roles();
        return std::move(plan_);
    }

private:
    // ---- config ----
    void read_config() {
        plan_.family = rules_.id;
        plan_.model_type = config_.model_type();
        plan_.num_hidden_layers = positive("num_hidden_layers", config_.require_int("num_hidden_layers"));
        plan_.hidden_size = positive("hidden_size", config_.require_int("hidden_size"));
        plan_.num_experts = positive(rules_.expert_count_keys.front(), first_int(config_, rules_.expert_count_keys));
        plan_.expert_intermediate_size =
            positive(rules_.expert_size_keys.front(), first_int(config_, rules_.expert_size_keys));
        plan_.experts_per_token = positive(rules_.top_k_keys.front(), first_int(config_, rules_.top_k_keys));
        if (plan_.experts_per_token > plan_.num_experts)
            config_error(rules_.top_k_keys.front() + " (" + std::to_string(plan_.experts_per_token) +
                         ") exceeds the number of experts (" + std::to_string(plan_.num_experts) + ")");
        if (rules_.router) plan_.router = rules_.router(config_, plan_.experts_per_token);
    }

    std::int64_t positive(const std::string& key, std::int64_t value) { return positive_value(config_, key, value); }

    [[noreturn]] void config_error(const std::string& message, const std::string& code = "InvalidConfig") {
        throw Error(ErrorKind::input, message, {.file = config_.source(), .code = code});
    }

    // ---- tensors ----
    [[noreturn]] void tensor_error(const std::string& tensor, const std::string& message, const std::string& code,
                                   const std::string& hint = {}) {
        // The tensor's file; for a missing one the index, or the model's only file (a single
        // safetensors, a GGUF), else its folder.
        const auto& shards = checkpoint_.shard_names();
        std::string file = checkpoint_.contains(tensor)       ? (checkpoint_.directory() / checkpoint_.shard_of(tensor)).string()
                           : checkpoint_.index_path()        ? checkpoint_.index_path()->string()
                           : shards.size() == 1 ? (checkpoint_.directory() / shards.front()).string()
                                                : checkpoint_.directory().string();
        throw Error(ErrorKind::input, message, {.file = file, .tensor = tensor, .code = code, .hint = hint});
    }

    void find_layer_prefix() {
        for (const auto& p : rules_.layer_prefixes)
            for (const auto& name : checkpoint_.tensor_names())
                if (split_layer_name(name, {p})) {
                    prefix_ = p;
                    return;
                }
        std::string tried;
        for (const auto& p : rules_.layer_prefixes) tried += (tried.empty() ? "'" : ", '") + p + "N.'";
        tensor_error("", "no decoder-layer tensors found (looked for names starting with " + tried + ")",
                     "NoLayers");
    }

    // The work done per layer must follow the tensors present, not the config's claim: a
    // num_hidden_layers beyond the checkpoint's layers is refused before anything loops over it.
    // Distinct indices, not the highest one: a tensor name can claim any index too.
    void check_layer_count() {
        std::unordered_set<std::int64_t> present;
        for (const auto& name : checkpoint_.tensor_names())
            if (auto split = split_layer_name(name, {prefix_})) present.insert(split->layer);
        if (plan_.num_hidden_layers > static_cast<std::int64_t>(present.size()))
            config_error("'num_hidden_layers' is " + std::to_string(plan_.num_hidden_layers) +
                             ", but the checkpoint holds tensors of only " + std::to_string(present.size()) +
                             " decoder layers ('" + prefix_ + "N.')",
                         "LayerCountMismatch");
    }

    std::string layer_prefix(std::int64_t layer) const { return prefix_ + std::to_string(layer) + "."; }

    // The name of a fused expert weight, with or without a ".weight" suffix.
    std::optional<std::string> fused_name(std::int64_t layer, const std::string& what) const {
        std::string base = layer_prefix(layer) + "mlp.experts." + what;
        if (checkpoint_.find_weight(base)) return base;
        if (checkpoint_.find_weight(base + ".weight")) return base + ".weight";
        return std::nullopt;
    }

    const ExpertNaming* per_expert_naming(std::int64_t layer) const {
        for (const auto& n : rules_.namings)
            if (checkpoint_.find_weight(layer_prefix(layer) + n.experts + ".0." + n.projections[0] + ".weight")) return &n;
        return nullptr;
    }

    // Every tensor a weight is decoded from (and the ones it ignores) is accounted for: the
    // primary as the expert, the rest as its encoding's side tensors.
    void record_planned(const EncodedWeight& w) {
        for (const auto& [role, tensor] : w.tensors)
            (tensor == w.primary() ? planned_ : planned_scales_).insert(tensor);
        for (const auto& tensor : w.ignored) planned_scales_.insert(tensor);
    }

    void plan_layer(std::int64_t layer) {
        const ExpertNaming* naming = per_expert_naming(layer);
        auto fused = fused_name(layer, "gate_up_proj");
        if (naming && fused)
            tensor_error(*fused, "layer " + std::to_string(layer) + " holds both per-expert and fused expert tensors",
                         "AmbiguousExperts");
        MoeLayerPlan layer_plan;
        layer_plan.layer = layer;
        if (naming) {
            set_layout(ExpertLayout::per_expert, layer);
            for (std::int64_t e = 0; e < plan_.num_experts; ++e) layer_plan.experts.push_back(per_expert(layer, e, *naming));
            naming_[layer] = naming;
        } else if (fused) {
            plan_fused(layer, *fused, layer_plan);
        } else {
            const ExpertNaming& canonical = rules_.namings.front();
            tensor_error(layer_prefix(layer) + canonical.experts + ".0." + canonical.projections[0] + ".weight",
                         "MoE layer " + std::to_string(layer) + " has no routed-expert tensors (neither '" +
                             canonical.experts + ".E." + canonical.projections[0] +
                             ".weight' nor a fused 'mlp.experts.gate_up_proj')",
                         "MissingTensor",
                         "the config says this layer is a MoE layer; check num_hidden_layers and the MoE layer keys");
        }
        find_router(layer, layer_plan);
        plan_.moe_layers.push_back(std::move(layer_plan));
    }

    // The router's tensors are recorded when present; they are read only by what routes
    // tokens (routed-only calibration), which names them when missing.
    void find_router(std::int64_t layer, MoeLayerPlan& layer_plan) const {
        for (const auto& name : rules_.router_weights)
            if (checkpoint_.contains(layer_prefix(layer) + name)) {
                layer_plan.router_weight = layer_prefix(layer) + name;
                break;
            }
        if (plan_.router.uses_bias && checkpoint_.contains(layer_prefix(layer) + rules_.router_bias))
            layer_plan.router_bias = layer_prefix(layer) + rules_.router_bias;
    }

    void set_layout(ExpertLayout layout, std::int64_t layer) {
        if (!plan_.moe_layers.empty() && plan_.layout != layout)
            tensor_error(layer_prefix(layer) + "mlp.experts",
                         "layer " + std::to_string(layer) + " stores its experts as " +
                             std::string(expert_layout_name(layout)) + " but earlier layers as " +
                             std::string(expert_layout_name(plan_.layout)),
                         "MixedLayouts");
        plan_.layout = layout;
    }

    // Expected [out, in] of a projection.
    std::pair<std::int64_t, std::int64_t> expected_matrix(Projection p) const {
        return p == Projection::down ? std::pair{plan_.hidden_size, plan_.expert_intermediate_size}
                                     : std::pair{plan_.expert_intermediate_size, plan_.hidden_size};
    }

    std::string size_explanation(Projection p) const {
        std::string i = rules_.expert_size_keys.front() + " " + std::to_string(plan_.expert_intermediate_size);
        std::string h = "hidden_size " + std::to_string(plan_.hidden_size);
        return p == Projection::down ? h + " x " + i : i + " x " + h;
    }

    ExpertPlan per_expert(std::int64_t layer, std::int64_t expert, const ExpertNaming& naming) {
        ExpertPlan ep;
        ep.expert = expert;
        for (Projection p : expert_projections) {
            std::string name = layer_prefix(layer) + naming.experts + "." + std::to_string(expert) + "." +
                               naming.projections[static_cast<int>(p)] + ".weight";
            const EncodedWeight* w = checkpoint_.find_weight(name);
            if (!w)
                tensor_error(name, "missing routed-expert tensor (the config says " + std::to_string(plan_.num_experts) +
                                       " experts per MoE layer)",
                             "MissingTensor");
            auto [rows, cols] = expected_matrix(p);
            if (w->shape != Shape{rows, cols})
                tensor_error(name, "has shape " + shape_to_string(w->shape) + ", but the config implies " +
                                       dims(rows, cols) + " (" + size_explanation(p) + ")",
                             "ShapeMismatch");
            ExpertWeightSource& src = ep.weights[static_cast<int>(p)];
            src.tensor = name;
            src.rows = rows;
            src.cols = cols;
            record_planned(*w);
        }
        return ep;
    }

    void plan_fused(std::int64_t layer, const std::string& gate_up, MoeLayerPlan& layer_plan) {
        auto down = fused_name(layer, "down_proj");
        if (!down)
            tensor_error(gate_up, "has no matching fused 'mlp.experts.down_proj' in layer " + std::to_string(layer),
                         "MissingTensor");
        const EncodedWeight& gu = checkpoint_.weight(gate_up);
        const EncodedWeight& dn = checkpoint_.weight(*down);
        const std::int64_t E = plan_.num_experts, H = plan_.hidden_size, I = plan_.expert_intermediate_size;
        const std::int64_t I2 = checked_mul(std::int64_t{2}, I, "2 x " + rules_.expert_size_keys.front(),
                                            {.file = config_.source()});
        const bool linear = gu.shape == Shape{E, I2, H} && dn.shape == Shape{E, H, I};
        const bool bmm = gu.shape == Shape{E, H, I2} && dn.shape == Shape{E, I, H};
        if (linear == bmm)  // neither (both cannot hold for I > 0)
            tensor_error(gate_up,
                         "fused experts have gate_up " + shape_to_string(gu.shape) + " and down " +
                             shape_to_string(dn.shape) + ", which match neither layout A (" +
                             shape_to_string({E, I2, H}) + " / " + shape_to_string({E, H, I}) + ") nor layout B (" +
                             shape_to_string({E, H, I2}) + " / " + shape_to_string({E, I, H}) +
                             ") for experts " + std::to_string(E) + ", hidden_size " + std::to_string(H) +
                             ", expert size " + std::to_string(I),
                         "AmbiguousFusedLayout", "refusing to guess how gate and up are packed");
        if (rules_.interleaved_gate_up && !linear)
            tensor_error(gate_up,
                         "has the shape of layout B " + shape_to_string(gu.shape) +
                             ", but this family interleaves gate and up; interleaved columns cannot be sliced",
                         "UnsupportedFusedLayout", "convert the family's release checkpoint (layout A rows), not a dequantized export");
        set_layout(linear ? ExpertLayout::fused_linear : ExpertLayout::fused_bmm, layer);
        for (std::int64_t e = 0; e < E; ++e) {
            ExpertPlan ep;
            ep.expert = e;
            for (Projection p : expert_projections) {
                ExpertWeightSource& src = ep.weights[static_cast<int>(p)];
                auto [rows, cols] = expected_matrix(p);
                src.tensor = p == Projection::down ? *down : gate_up;
                src.rows = rows;
                src.cols = cols;
                ExpertWeightSource::FusedSlice slice;
                slice.expert = e;
                slice.transposed = !linear;
                if (p == Projection::down) {
                    slice.length = linear ? H : I;  // the whole stored matrix
                } else {
                    if (rules_.interleaved_gate_up) {  // row 2j gate j, row 2j + 1 up j
                        slice.offset = p == Projection::gate ? 0 : 1;
                        slice.step = 2;
                    } else {
                        slice.offset = p == Projection::gate ? 0 : I;  // gate first, then up
                    }
                    slice.length = I;
                    slice.along_columns = !linear;
                }
                src.slice = slice;
            }
            layer_plan.experts.push_back(ep);
        }
        record_planned(gu);
        record_planned(dn);
        plan_fused_bias(gate_up, {E, I2});
        plan_fused_bias(*down, {E, H});
    }

    // A fused expert weight's bias `<weight>_bias` (gpt-oss) is a parameter of the routed
    // experts: planned with them (role routed_expert), so no format copies it as something else
    // and formats with no place for expert biases can refuse it.
    void plan_fused_bias(const std::string& weight, const Shape& expected) {
        const std::string bias = weight + "_bias";
        if (!checkpoint_.contains(bias)) return;
        const Shape& shape = checkpoint_.info(bias).shape;
        if (shape != expected)
            tensor_error(bias, "has shape " + shape_to_string(shape) + ", but its fused experts imply " +
                                   shape_to_string(expected),
                         "ShapeMismatch");
        planned_.insert(bias);
    }

    // ---- roles ----
    void assign_roles() {
        RoleContext context{rules_.layer_prefixes, plan_.num_hidden_layers, moe_layer_};
        std::vector<std::string> unknown;
        for (const auto& name : checkpoint_.tensor_names()) {
            TensorRole role;
            if (planned_.count(name)) role = TensorRole::routed_expert;
            else if (planned_scales_.count(name)) role = TensorRole::routed_expert_scale;
            else {
                check_not_an_unplanned_expert(name);
                role = classify_tensor(name, context);
            }
            if (role == TensorRole::other) unknown.push_back(name);
            plan_.roles.emplace_back(name, role);
        }
        if (!unknown.empty()) {
            std::string examples;
            for (std::size_t i = 0; i < std::min<std::size_t>(3, unknown.size()); ++i)
                examples += (i ? ", " : "") + unknown[i];
            plan_.warnings.push_back(std::to_string(unknown.size()) +
                                     " tensor(s) have no known role: formats copy them unchanged (GGUF leaves a vision tower "
                                     "out, as llama.cpp's converter does), e.g. " + examples);
        }
    }

    // A tensor below a MoE layer's experts path that the plan does not account for (an expert
    // index beyond the config's count, an unknown projection, a leftover scale) means the config
    // and the checkpoint disagree; so does an expert tensor in a layer the config calls dense.
    void check_not_an_unplanned_expert(const std::string& name) {
        auto split = split_layer_name(name, {prefix_});
        if (!split || split->layer >= plan_.num_hidden_layers) return;  // MTP layers are skipped anyway
        for (const auto& naming : rules_.namings) {
            std::string experts = naming.experts + ".";
            if (!split->rest.starts_with(experts)) continue;
            std::string_view tail = split->rest.substr(experts.size());
            std::int64_t index = -1;
            std::from_chars(tail.data(), tail.data() + tail.size(), index);
            if (!moe_layer_[static_cast<std::size_t>(split->layer)])
                tensor_error(name, "looks like a routed expert, but the config makes layer " +
                                       std::to_string(split->layer) + " a dense layer",
                             "UnexpectedExpert");
            if (index >= plan_.num_experts)
                tensor_error(name, "has expert index " + std::to_string(index) + ", but the config says " +
                                       std::to_string(plan_.num_experts) + " experts",
                             "UnexpectedExpert");
            if (plan_.layout == ExpertLayout::per_expert && naming_.count(split->layer) &&
                naming_.at(split->layer) == &naming && !name.ends_with("bias"))
                tensor_error(name, "is below the experts of layer " + std::to_string(split->layer) +
                                       " but is not a gate/up/down weight or its scale",
                             "UnexpectedExpert");
        }
    }

    const FamilyRules& rules_;
    const ModelConfig& config_;
    const Checkpoint& checkpoint_;
    ModelPlan plan_;
    std::string prefix_;
    std::vector<bool> moe_layer_;
    std::map<std::int64_t, const ExpertNaming*> naming_;
    std::unordered_set<std::string> planned_;
    std::unordered_set<std::string> planned_scales_;
};

bool owns(const FamilyRules& rules, const std::string& model_type) {
    return !model_type.empty() &&
           std::find(rules.model_types.begin(), rules.model_types.end(), model_type) != rules.model_types.end();
}

}  // namespace

int match_family(const FamilyRules& rules, const ModelConfig& config) {
    std::string root_type;
    if (auto v = config.root().get("model_type"); v && v->is_string()) root_type = v->as_string();
    if (!owns(rules, config.model_type()) && !owns(rules, root_type)) return 0;
    // A VLM's top-level model_type names the release; its text_config may name another family's
    // (MiniMax-M3's says minimax_m2): the family owning the top level wins.
    int score = owns(rules, root_type) ? 105 : 100;
    for (const auto& a : config.architectures())
        if (std::find(rules.architectures.begin(), rules.architectures.end(), a) != rules.architectures.end()) score += 10;
    return score;
}

ModelPlan build_plan(const FamilyRules& rules, const ModelConfig& config, const Checkpoint& checkpoint) {
    return PlanBuilder(rules, config, checkpoint).build();
}

}  // namespace moequant::adapters
