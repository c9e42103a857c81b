// MiniMax-M2 / M2.1 / M2.5 / M2.7 (model-families-2026.md §3.5): every layer MoE with
// `block_sparse_moe.experts.E.{w1,w3,w2}` (w1 = gate, w3 = up, w2 = down), `num_local_experts`,
// `intermediate_size` as the expert size, no shared expert; an F32 router
// `block_sparse_moe.gate.weight` with an F32 `block_sparse_moe.e_score_correction_bias` (not
// under gate.); sigmoid scores, top-k by score + bias, weights renormalized, no groups, no
// scaling; GQA with one RMSNorm over the whole q (and k) projection and rotary on the first
// rotary_dim of each head; MTP modules at layer indices num_hidden_layers + i (skipped).
// MiniMax-M2.7 keeps M2's model_type, architecture and tensors; its config.json differs only in
// max_position_embeddings, which `synth --family minimax_m27` writes (docs/families.md).

#include "gqa_family_adapter.hpp"
#include "minimax_rules.hpp"
#include "synth/family_checkpoint.hpp"
#include "synth/synth_blocks.hpp"

#include <moequant/error.hpp>
#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace moequant::adapters {
namespace {

FamilyRules minimax_m2_rules() {
    FamilyRules r = minimax_family_rules("MiniMax-M2/M2.1/M2.5/M2.7: block_sparse_moe w1/w3/w2 experts, F32 sigmoid router, MTP layers",
                                         {"minimax_m2"}, {"MiniMaxM2ForCausalLM"});
    r.releases = {{"minimax_m27", "minimax_m2", "MiniMax-M2.7: M2's tensors, max_position_embeddings 204800"}};
    return r;
}

struct Preset : SynthSizes {
    std::int64_t rotary_dim;
};
// One KV head of 64: k/v [64, H] give FP8 edge blocks.
constexpr Preset tiny{{256, 2, 8, 2, 256, 4, 1, 64, 512}, 32};
constexpr Preset small{{512, 4, 16, 4, 512, 8, 2, 64, 1024}, 32};
constexpr std::int64_t mtp_modules = 1;

class MiniMaxM2Adapter final : public GqaFamilyAdapter {
public:
    MiniMaxM2Adapter() : GqaFamilyAdapter(minimax_m2_rules()) {}

    void adjust_attention(const ModelConfig& config, GqaAttentionSpec& attention) const override {
        if (config_flag(config, "use_qk_norm", true)) {
            const std::string type = config.string_or("qk_norm_type", "per_layer");
            if (type != "per_layer")
                throw Error(ErrorKind::input, "qk_norm_type '" + type + "' is not supported for minimax_m2 (per_layer)",
                            {.file = config.source(), .code = "InvalidConfig"});
            attention.qk_norm_whole = true;
        }
        attention.rotary_dim = partial_rotary_dim(config, attention.head_dim);
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const SynthSettings s = read_synth_settings(options, rules().model_types, {"per-expert"}, rules().releases);
        const Preset p = s.small ? small : tiny;

        const SynthTokenizer tokenizer = minimax_style_tokenizer(p.vocab);
        const std::int64_t H = p.hidden;
        FamilyCheckpoint checkpoint{.tokenizer = tokenizer, .config = config(p, s, tokenizer), .hidden = H,
                                    .layers = p.layers + mtp_modules};
        checkpoint.layer = [&](std::vector<SynthTensor>& t, const std::string& l, std::int64_t layer) {
            if (layer >= p.layers) {  // an MTP module's inputs, then one transformer layer [U: names]
                t.push_back(norm_weight(l + "enorm.weight", H));
                t.push_back(norm_weight(l + "hnorm.weight", H));
                t.push_back(linear_weight(l + "eh_proj.weight", H, 2 * H, s.fp8));
            }
            t.push_back(norm_weight(l + "input_layernorm.weight", H));
            add_gqa_attention(t, l, {H, p.heads, p.kv_heads, p.head_dim}, s.fp8);
            t.push_back(norm_weight(l + "self_attn.q_norm.weight", p.heads * p.head_dim));
            t.push_back(norm_weight(l + "self_attn.k_norm.weight", p.kv_heads * p.head_dim));
            t.push_back(norm_weight(l + "post_attention_layernorm.weight", H));
            const std::string moe = l + "block_sparse_moe.";
            t.push_back({moe + "gate.weight", DType::F32, {p.experts, H}, SynthFill::normal, 0.02});
            t.push_back({moe + "e_score_correction_bias", DType::F32, {p.experts}, SynthFill::normal, 0.01});
            for (std::int64_t e = 0; e < p.experts; ++e)
                add_swiglu(t, moe + "experts." + std::to_string(e) + ".", {"w1", "w3", "w2"}, p.expert_intermediate, H, s.fp8);
        };
        checkpoint.shard_count = s.small ? 5 : 3;
        write_family_checkpoint(checkpoint, directory, s);
    }

private:
    static json::value config(const Preset& p, const SynthSettings& s, const SynthTokenizer& tokenizer) {
        json::object c = family_config(tokenizer, s.encoding, p, mixtral_expert_keys(), {"minimax_m2", "MiniMaxM2ForCausalLM"});
        json::array attn_types;
        for (std::int64_t i = 0; i < p.layers; ++i) attn_types.push_back(1);
        c["attn_type_list"] = std::move(attn_types);
        // M2, M2.1 and M2.5 say 196608, M2.7 204800 (docs/families.md, "Releases").
        c["max_position_embeddings"] = s.release == "minimax_m27" ? 204800 : 196608;
        c["mtp_transformer_layers"] = 1;
        c["num_mtp_modules"] = mtp_modules;
        c["qk_norm_type"] = "per_layer";
        c["rms_norm_eps"] = 1e-06;
        c["rope_theta"] = 5000000;
        c["rotary_dim"] = p.rotary_dim;
        c["scoring_func"] = "sigmoid";
        c["shared_intermediate_size"] = 0;
        c["use_mtp"] = true;
        c["use_qk_norm"] = true;
        c["use_routing_bias"] = true;
        // The release's FP8 quantization_config (§2.3): the router, its bias and lm_head stay
        // unquantized.
        if (s.encoding == SynthEncoding::fp8_block)
            c["quantization_config"] = json::object{{"activation_scheme", "dynamic"},
                                                    {"fmt", "float8_e4m3fn"},
                                                    {"modules_to_not_convert", json::array{"gate", "e_score_correction_bias", "lm_head"}},
                                                    {"quant_method", "fp8"},
                                                    {"weight_block_size", json::array{128, 128}}};
        return c;
    }
};

}  // namespace
}  // namespace moequant::adapters

MOEQUANT_PLUGIN("minimax_m2", "0.1.0", MOEQUANT_KIND_ADAPTER, "MiniMax-M2/M2.1/M2.5/M2.7 family adapter") {
    registrar.add(std::make_unique<moequant::adapters::MiniMaxM2Adapter>());
}
