// Mixtral-8x7B / 8x22B (model-families.md §5.3): `block_sparse_moe.experts.E.{w1,w3,w2}`
// (w1 = gate, w3 = up, w2 = down), `num_local_experts`, `intermediate_size` as the expert size,
// every layer MoE, no shared experts, no MTP. Also accepted: Mistral-native tensor names
// (`layers.L.experts.E.w1.weight`, no "model." prefix) and the transformers-v5 fused layout A
// (`mlp.experts.gate_up_proj` [E, 2I, H], router renamed to `mlp.gate.weight`).

#include "gqa_decoder.hpp"
#include "rule_based_adapter.hpp"
#include "synth/synth_blocks.hpp"
#include "synth/synth_side_files.hpp"

#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace {

using namespace moequant;
using namespace moequant::adapters;
namespace json = boost::json;

FamilyRules mixtral_rules() {
    FamilyRules r;
    r.id = "mixtral";
    r.description = "Mixtral-8x7B/8x22B: block_sparse_moe w1/w3/w2 experts; Mistral-native and fused layouts";
    r.model_types = {"mixtral"};
    r.architectures = {"MixtralForCausalLM"};
    r.expert_count_keys = {"num_local_experts"};
    r.expert_size_keys = {"intermediate_size"};
    r.is_moe_layer = &moe_every_layer;
    // Mixtral always renormalizes its top-2 (there is no norm_topk_prob switch).
    r.router = [](const ModelConfig& c, std::int64_t k) {
        RouterSpec spec = softmax_router(c, k, true);
        spec.normalize = true;
        return spec;
    };
    r.router_weights = {"block_sparse_moe.gate.weight", "mlp.gate.weight", "gate.weight"};
    r.chat = [](const ModelConfig&) {  // Mistral's [INST] format; a system prompt goes first
        ChatTemplate t;
        t.begin = "<s>";
        t.system = {"", "\n\n"};
        t.user = {"[INST] ", " [/INST]"};
        t.assistant = {"", "</s>"};
        return t;
    };
    r.namings = {{"block_sparse_moe.experts", {"w1", "w3", "w2"}}, {"experts", {"w1", "w3", "w2"}}};
    r.layer_prefixes = {"model.layers.", "layers."};
    return r;
}

struct Preset {
    std::int64_t hidden, intermediate, layers, experts, top_k, heads, kv_heads, vocab;
};
constexpr Preset tiny{256, 256, 2, 4, 2, 4, 1, 512};  // one KV head: k/v [64, H] give FP8 edge blocks
constexpr Preset small{512, 512, 4, 8, 2, 8, 1, 1024};

class MixtralAdapter final : public RuleBasedAdapter {
public:
    MixtralAdapter() : RuleBasedAdapter(mixtral_rules()) {}

    // Mixtral (model-families.md §5.3): GQA with full rotate-half RoPE, no q/k norm, plain
    // RMSNorm, softmax top-2 always renormalized, no shared expert. Hugging Face tensor names
    // only (the Mistral-native consolidated layout has no forward here).
    std::unique_ptr<DecoderForward> decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                    const ModelPlan& plan) const override {
        return make_gqa_decoder(decoder_spec_from_config(config, checkpoint), gqa_attention_from_config(config), checkpoint,
                                plan);
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const SynthSettings s =
            read_synth_settings(options, rules().model_types, {"per-expert", "fused-linear", "mistral-native"});
        const Preset p = s.small ? small : tiny;
        const bool native = s.layout == "mistral-native", fused = s.layout == "fused-linear";
        if (fused && s.fp8) throw_usage_error("--layout fused-linear is BF16 only (FP8 fused experts are not a real layout)");

        TokenizerRequest request;
        request.style = TokenizerStyle::sentencepiece_bpe;
        request.vocab_size = p.vocab;
        request.special_tokens = {"<unk>", "<s>", "</s>"};
        request.bos_token = "<s>";
        request.eos_token = "</s>";
        const SynthTokenizer tokenizer = make_synth_tokenizer(request);

        SynthModel model;
        model.encoding = s.encoding;
        model.config = config(p, s, tokenizer);
        add_tokenizer_files(model, tokenizer);
        auto& t = model.tensors;
        const std::int64_t H = p.hidden, head_dim = p.hidden / p.heads;
        const std::string root = native ? "" : "model.";
        t.push_back(embedding_weight(root + (native ? "tok_embeddings.weight" : "embed_tokens.weight"), tokenizer.vocab_size, H));
        for (std::int64_t layer = 0; layer < p.layers; ++layer) {
            const std::string l = root + "layers." + std::to_string(layer) + ".";
            if (native) {  // Mistral's own names
                t.push_back(norm_weight(l + "attention_norm.weight", H));
                t.push_back(linear_weight(l + "attention.wq.weight", p.heads * head_dim, H, s.fp8));
                t.push_back(linear_weight(l + "attention.wk.weight", p.kv_heads * head_dim, H, s.fp8));
                t.push_back(linear_weight(l + "attention.wv.weight", p.kv_heads * head_dim, H, s.fp8));
                t.push_back(linear_weight(l + "attention.wo.weight", H, p.heads * head_dim, s.fp8));
                t.push_back(norm_weight(l + "ffn_norm.weight", H));
                t.push_back(bf16_tensor(l + "gate.weight", {p.experts, H}));
                for (std::int64_t e = 0; e < p.experts; ++e)
                    add_swiglu(t, l + "experts." + std::to_string(e) + ".", {"w1", "w3", "w2"}, p.intermediate, H, s.fp8);
                continue;
            }
            t.push_back(norm_weight(l + "input_layernorm.weight", H));
            add_gqa_attention(t, l, {H, p.heads, p.kv_heads, head_dim}, s.fp8);
            t.push_back(norm_weight(l + "post_attention_layernorm.weight", H));
            if (fused) {
                t.push_back(bf16_tensor(l + "mlp.gate.weight", {p.experts, H}));
                add_fused_experts(t, l, p.experts, p.intermediate, H, /*layout_b=*/false);
            } else {
                t.push_back(bf16_tensor(l + "block_sparse_moe.gate.weight", {p.experts, H}));
                for (std::int64_t e = 0; e < p.experts; ++e)
                    add_swiglu(t, l + "block_sparse_moe.experts." + std::to_string(e) + ".", {"w1", "w3", "w2"},
                               p.intermediate, H, s.fp8);
            }
        }
        t.push_back(norm_weight(root + "norm.weight", H));
        t.push_back(bf16_tensor(native ? "output.weight" : "lm_head.weight", {tokenizer.vocab_size, H}));

        model.shard_count = native ? 1 : (s.small ? 5 : 3);
        if (native) model.shard_name = [](std::size_t, std::size_t) { return std::string("consolidated.safetensors"); };
        else model.shard_name = [](std::size_t n, std::size_t c) { return padded_shard_name(n, c, 5, 5); };
        write_synth_model(model, directory, s);
    }

private:
    static json::value config(const Preset& p, const SynthSettings& s, const SynthTokenizer& tokenizer) {
        json::object c = base_config(tokenizer.vocab_size, tokenizer.bos_token_id, tokenizer.eos_token_id, s.encoding);
        c["architectures"] = json::array{"MixtralForCausalLM"};
        c["hidden_size"] = p.hidden;
        c["intermediate_size"] = p.intermediate;
        c["max_position_embeddings"] = 32768;
        c["model_type"] = "mixtral";
        c["num_attention_heads"] = p.heads;
        c["num_experts_per_tok"] = p.top_k;
        c["num_hidden_layers"] = p.layers;
        c["num_key_value_heads"] = p.kv_heads;
        c["num_local_experts"] = p.experts;
        c["output_router_logits"] = false;
        c["rms_norm_eps"] = 1e-05;
        c["rope_theta"] = 1000000.0;
        c["router_aux_loss_coef"] = 0.02;
        c["sliding_window"] = nullptr;
        return c;
    }
};

}  // namespace

MOEQUANT_PLUGIN("mixtral", "0.1.0", MOEQUANT_KIND_ADAPTER, "Mixtral family adapter (HF, Mistral-native, fused)") {
    registrar.add(std::make_unique<MixtralAdapter>());
}
