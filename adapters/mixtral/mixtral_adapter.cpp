// Mixtral-8x7B / 8x22B (model-families.md §5.3): `block_sparse_moe.experts.E.{w1,w3,w2}`
// (w1 = gate, w3 = up, w2 = down), `num_local_experts`, `intermediate_size` as the expert size,
// every layer MoE, no shared experts, no MTP. Also accepted: Mistral-native tensor names
// (`layers.L.experts.E.w1.weight`, no "model." prefix) and the transformers-v5 fused layout A
// (`mlp.experts.gate_up_proj` [E, 2I, H], router renamed to `mlp.gate.weight`).

#include "gqa_family_adapter.hpp"
#include "synth/family_checkpoint.hpp"
#include "synth/synth_blocks.hpp"

#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace moequant::adapters {
namespace {

FamilyRules mixtral_rules() {
    FamilyRules r = family_rules("Mixtral-8x7B/8x22B: block_sparse_moe w1/w3/w2 experts; Mistral-native and fused layouts",
                                 {"mixtral"}, {"MixtralForCausalLM"}, mixtral_expert_keys());
    r.router = &renormalized_softmax_router;  // Mixtral has no norm_topk_prob switch
    r.router_weights = {"block_sparse_moe.gate.weight", "mlp.gate.weight", "gate.weight"};
    r.chat = [](const ModelConfig&) {  // Mistral's [INST] format; a system prompt goes first
        return ChatTemplate{.begin = "<s>", .system = {"", "\n\n"}, .user = {"[INST] ", " [/INST]"}, .assistant = {"", "</s>"}};
    };
    r.namings = {{"block_sparse_moe.experts", {"w1", "w3", "w2"}}, {"experts", {"w1", "w3", "w2"}}};
    r.layer_prefixes = {"model.layers.", "layers."};
    return r;
}

// No head_dim in Mixtral's config (hidden / heads). One KV head: k/v [64, H] give FP8 edge blocks.
constexpr SynthSizes tiny{256, 2, 4, 2, 256, 4, 1, 0, 512};
constexpr SynthSizes small{512, 4, 8, 2, 512, 8, 1, 0, 1024};

// Mixtral (model-families.md §5.3): GQA with full rotate-half RoPE, no q/k norm, plain RMSNorm,
// softmax top-2 always renormalized, no shared expert: the config's GQA decoder as it is. Hugging
// Face tensor names only (the Mistral-native consolidated layout has no forward here).
class MixtralAdapter final : public GqaFamilyAdapter {
public:
    MixtralAdapter() : GqaFamilyAdapter(mixtral_rules()) {}

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const SynthSettings s =
            read_synth_settings(options, rules().model_types, {"per-expert", "fused-linear", "mistral-native"});
        const SynthSizes& p = s.small ? small : tiny;
        const bool native = s.layout == "mistral-native", fused = s.layout == "fused-linear";
        if (fused && s.fp8) throw_usage_error("--layout fused-linear is BF16 only (FP8 fused experts are not a real layout)");

        const SynthTokenizer tokenizer = make_synth_tokenizer({.style = TokenizerStyle::sentencepiece_bpe,
                                                               .vocab_size = p.vocab,
                                                               .special_tokens = {"<unk>", "<s>", "</s>"},
                                                               .bos_token = "<s>",
                                                               .eos_token = "</s>"});
        const std::int64_t H = p.hidden, head_dim = p.hidden / p.heads;
        FamilyCheckpoint checkpoint{.tokenizer = tokenizer, .config = config(p, s, tokenizer), .hidden = H, .layers = p.layers};
        if (native) {  // Mistral's own names
            checkpoint.root = "";
            checkpoint.embedding = "tok_embeddings.weight";
            checkpoint.head = "output.weight";
            checkpoint.shard_name = [](std::size_t, std::size_t) { return std::string("consolidated.safetensors"); };
        }
        checkpoint.layer = [&](std::vector<SynthTensor>& t, const std::string& l, std::int64_t) {
            if (native) {
                t.push_back(norm_weight(l + "attention_norm.weight", H));
                t.push_back(linear_weight(l + "attention.wq.weight", p.heads * head_dim, H, s.fp8));
                t.push_back(linear_weight(l + "attention.wk.weight", p.kv_heads * head_dim, H, s.fp8));
                t.push_back(linear_weight(l + "attention.wv.weight", p.kv_heads * head_dim, H, s.fp8));
                t.push_back(linear_weight(l + "attention.wo.weight", H, p.heads * head_dim, s.fp8));
                t.push_back(norm_weight(l + "ffn_norm.weight", H));
                t.push_back(bf16_tensor(l + "gate.weight", {p.experts, H}));
                for (std::int64_t e = 0; e < p.experts; ++e)
                    add_swiglu(t, l + "experts." + std::to_string(e) + ".", {"w1", "w3", "w2"}, p.expert_intermediate, H, s.fp8);
                return;
            }
            t.push_back(norm_weight(l + "input_layernorm.weight", H));
            add_gqa_attention(t, l, {H, p.heads, p.kv_heads, head_dim}, s.fp8);
            t.push_back(norm_weight(l + "post_attention_layernorm.weight", H));
            if (fused) {
                t.push_back(bf16_tensor(l + "mlp.gate.weight", {p.experts, H}));
                add_fused_experts(t, l, p.experts, p.expert_intermediate, H, /*layout_b=*/false);
            } else {
                t.push_back(bf16_tensor(l + "block_sparse_moe.gate.weight", {p.experts, H}));
                for (std::int64_t e = 0; e < p.experts; ++e)
                    add_swiglu(t, l + "block_sparse_moe.experts." + std::to_string(e) + ".", {"w1", "w3", "w2"},
                               p.expert_intermediate, H, s.fp8);
            }
        };
        checkpoint.shard_count = native ? 1 : (s.small ? 5 : 3);
        write_family_checkpoint(checkpoint, directory, s);
    }

private:
    static json::value config(const SynthSizes& p, const SynthSettings& s, const SynthTokenizer& tokenizer) {
        json::object c = family_config(tokenizer, s.encoding, p, mixtral_expert_keys(), {"mixtral", "MixtralForCausalLM"});
        c["max_position_embeddings"] = 32768;
        c["output_router_logits"] = false;
        c["rms_norm_eps"] = 1e-05;
        c["rope_theta"] = 1000000.0;
        c["router_aux_loss_coef"] = 0.02;
        c["sliding_window"] = nullptr;
        return c;
    }
};

}  // namespace
}  // namespace moequant::adapters

MOEQUANT_PLUGIN("mixtral", "0.1.0", MOEQUANT_KIND_ADAPTER, "Mixtral family adapter (HF, Mistral-native, fused)") {
    registrar.add(std::make_unique<moequant::adapters::MixtralAdapter>());
}
