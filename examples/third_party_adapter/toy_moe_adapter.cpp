// An example third-party family adapter for a made-up MoE family, "toy_moe", built only
// against the installed SDK. Its checkpoints look like this:
//   config.json: {"model_type": "toy_moe", "num_layers": L, "d_model": D, "n_experts": E,
//                 "expert_hidden": F, "top_k": K, "vocab_size": V}
//   embed.weight [V, D], final_norm.weight [D], head.weight [V, D]
//   blocks.{l}.norm1.weight / norm2.weight [D]
//   blocks.{l}.attn.qkv.weight [3D, D], blocks.{l}.attn.out.weight [D, D]
//   blocks.{l}.moe.router.weight [E, D]
//   blocks.{l}.moe.experts.{e}.wi_gate.weight / wi_up.weight [F, D], wo.weight [D, F]
// The adapter recognises the family, plans every expert, gives every tensor a role, and can
// synthesize such a checkpoint (`moequant synth --family toy_moe`).

#include <moequant/error.hpp>
#include <moequant/output_file.hpp>
#include <moequant/plugin.hpp>
#include <moequant/sharded_writer.hpp>

#include <cstring>
#include <string>

namespace {

using namespace moequant;

struct ToySizes {
    std::int64_t layers, d_model, experts, expert_hidden, top_k, vocab;
};

ToySizes sizes_of(const ModelConfig& c) {
    return {c.require_int("num_layers"), c.require_int("d_model"),   c.require_int("n_experts"),
            c.require_int("expert_hidden"), c.require_int("top_k"), c.require_int("vocab_size")};
}

std::string block(std::int64_t l) { return "blocks." + std::to_string(l) + "."; }

class ToyMoeAdapter final : public ModelAdapter {
public:
    std::string_view id() const override { return "toy_moe"; }
    std::string_view description() const override { return "example third-party adapter for the made-up toy_moe family"; }
    std::vector<std::string> model_types() const override { return {"toy_moe"}; }

    int match(const ModelConfig& config, const Checkpoint&) const override {
        return config.model_type() == "toy_moe" ? 100 : 0;
    }

    ModelPlan plan(const ModelConfig& config, const Checkpoint& checkpoint) const override {
        const ToySizes s = sizes_of(config);
        ModelPlan plan;
        plan.family = "toy_moe";
        plan.model_type = config.model_type();
        plan.num_hidden_layers = s.layers;
        plan.hidden_size = s.d_model;
        plan.expert_intermediate_size = s.expert_hidden;
        plan.num_experts = s.experts;
        plan.experts_per_token = s.top_k;
        const char* names[3] = {"wi_gate", "wi_up", "wo"};
        for (std::int64_t l = 0; l < s.layers; ++l) {
            MoeLayerPlan layer{l, {}};
            for (std::int64_t e = 0; e < s.experts; ++e) {
                ExpertPlan ep{e, {}};
                for (int p = 0; p < 3; ++p) {
                    auto& src = ep.weights[p];
                    src.tensor = block(l) + "moe.experts." + std::to_string(e) + "." + names[p] + ".weight";
                    src.rows = p == 2 ? s.d_model : s.expert_hidden;
                    src.cols = p == 2 ? s.expert_hidden : s.d_model;
                    // Whatever its encoding; Error(input) if missing or undecodable.
                    const EncodedWeight& w = checkpoint.weight(src.tensor);
                    if (w.shape != Shape{src.rows, src.cols})
                        throw Error(ErrorKind::input, "has shape " + shape_to_string(w.shape) + ", expected " +
                                                          shape_to_string({src.rows, src.cols}),
                                    {.tensor = src.tensor, .code = "ShapeMismatch"});
                }
                layer.experts.push_back(ep);
            }
            plan.moe_layers.push_back(std::move(layer));
        }
        for (const auto& name : checkpoint.tensor_names()) plan.roles.emplace_back(name, role_of(name));
        return plan;
    }

    // dtype "bf16", or "int8-rowwise": the experts in the example encoding of
    // ../third_party_encoding (INT8 codes and an F32 scale per row), everything else BF16.
    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const bool small = options.get_string("preset", "tiny") == "small";
        const std::string dtype = options.get_string("dtype", "bf16");
        if (dtype != "bf16" && dtype != "int8-rowwise") throw_usage_error("toy_moe synthesizes bf16 or int8-rowwise");
        const bool int8 = dtype == "int8-rowwise";
        const ToySizes s{2, small ? 256 : 128, small ? 8 : 4, 256, 2, 64};
        write_file_atomically(directory / "config.json",
                              "{\n  \"model_type\": \"toy_moe\",\n  \"num_layers\": " + std::to_string(s.layers) +
                                  ",\n  \"d_model\": " + std::to_string(s.d_model) + ",\n  \"n_experts\": " +
                                  std::to_string(s.experts) + ",\n  \"expert_hidden\": " + std::to_string(s.expert_hidden) +
                                  ",\n  \"top_k\": " + std::to_string(s.top_k) + ",\n  \"vocab_size\": " +
                                  std::to_string(s.vocab) + "\n}\n");
        std::vector<TensorSpec> specs = {{"embed.weight", DType::BF16, {s.vocab, s.d_model}},
                                         {"final_norm.weight", DType::BF16, {s.d_model}},
                                         {"head.weight", DType::BF16, {s.vocab, s.d_model}}};
        for (std::int64_t l = 0; l < s.layers; ++l) {
            const std::string b = block(l);
            specs.push_back({b + "norm1.weight", DType::BF16, {s.d_model}});
            specs.push_back({b + "norm2.weight", DType::BF16, {s.d_model}});
            specs.push_back({b + "attn.qkv.weight", DType::BF16, {3 * s.d_model, s.d_model}});
            specs.push_back({b + "attn.out.weight", DType::BF16, {s.d_model, s.d_model}});
            specs.push_back({b + "moe.router.weight", DType::BF16, {s.experts, s.d_model}});
            for (std::int64_t e = 0; e < s.experts; ++e) {
                const std::string x = b + "moe.experts." + std::to_string(e) + ".";
                for (const char* p : {"wi_gate", "wi_up", "wo"}) {
                    const Shape shape = std::string(p) == "wo" ? Shape{s.d_model, s.expert_hidden} : Shape{s.expert_hidden, s.d_model};
                    specs.push_back({x + p + ".weight", int8 ? DType::I8 : DType::BF16, shape});
                    if (int8) specs.push_back({x + p + ".weight_row_scale", DType::F32, {shape[0]}});
                }
            }
        }
        ShardedSafetensorsWriter sharded(directory);
        SafetensorsWriter writer = sharded.open_shard(shard_file_name(1, 1), specs);
        std::uint64_t state = static_cast<std::uint64_t>(options.get_int("seed", 42)) * 6364136223846793005ull + 1;
        auto next = [&state] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
        for (const auto& spec : specs) {
            const auto n = static_cast<std::size_t>(shape_elements(spec.shape).value_or(0));
            if (spec.dtype == DType::I8) {  // codes in [-127, 127]
                std::vector<std::int8_t> codes(n);
                for (auto& q : codes) q = static_cast<std::int8_t>(static_cast<int>((next() >> 33) % 255) - 127);
                writer.write(spec.name, std::as_bytes(std::span<const std::int8_t>(codes)));
            } else if (spec.dtype == DType::F32) {  // row scales around 1/4096
                std::vector<float> scales(n);
                for (auto& v : scales) v = static_cast<float>(1 + (next() >> 40) % 64) / 262144.0f;
                writer.write(spec.name, std::as_bytes(std::span<const float>(scales)));
            } else {  // small BF16 values from a linear congruential generator
                std::vector<std::uint16_t> values(n);
                for (auto& v : values) {
                    next();
                    v = static_cast<std::uint16_t>(0x3C00 | ((state >> 40) & 0x7F) | ((state >> 32) & 0x8000));
                }
                writer.write(spec.name, std::as_bytes(std::span<const std::uint16_t>(values)));
            }
        }
        writer.finish();
        sharded.write_index();
    }

private:
    static TensorRole role_of(const std::string& name) {
        if (name == "embed.weight") return TensorRole::embedding;
        if (name == "head.weight") return TensorRole::lm_head;
        if (name.find("norm") != std::string::npos) return TensorRole::norm;
        if (name.find(".attn.") != std::string::npos) return TensorRole::attention;
        if (name.find(".moe.router.") != std::string::npos) return TensorRole::router;
        if (name.find(".moe.experts.") != std::string::npos)  // the weight, or a tensor of its encoding
            return name.ends_with(".weight") ? TensorRole::routed_expert : TensorRole::routed_expert_scale;
        return TensorRole::other;
    }
};

}  // namespace

MOEQUANT_PLUGIN("example_toy_moe", "1.0.0", MOEQUANT_KIND_ADAPTER,
                "example third-party family adapter built against the installed SDK") {
    registrar.add(std::make_unique<ToyMoeAdapter>());
}
