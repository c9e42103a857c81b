// Qwen3-Next-80B-A3B (model-families.md §5.2): 512 routed experts, one shared expert with a
// scalar `shared_expert_gate`, Gated DeltaNet linear-attention layers with gated full attention
// every `full_attention_interval` layers, and top-level `mtp.*` tensors that are skipped.

#include "qwen3_next_decoder.hpp"
#include "rule_based_adapter.hpp"
#include "synth_blocks.hpp"
#include "synth_side_files.hpp"

#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace {

using namespace moequant;
using namespace moequant::adapters;
namespace json = boost::json;

FamilyRules qwen3_next_rules() {
    FamilyRules r;
    r.id = "qwen3_next";
    r.description = "Qwen3-Next: 512 experts, shared expert + gate, Gated DeltaNet layers, mtp.* skipped";
    r.model_types = {"qwen3_next"};
    r.architectures = {"Qwen3NextForCausalLM"};
    r.expert_count_keys = {"num_experts"};
    r.expert_size_keys = {"moe_intermediate_size"};
    r.is_moe_layer = &moe_from_sparse_step;
    // HF Qwen3NextConfig: norm_topk_prob defaults to true.
    r.router = [](const ModelConfig& c, std::int64_t k) { return softmax_router(c, k, true); };
    r.chat = [](const ModelConfig&) { return chatml_template(); };
    r.namings = {{"mlp.experts", {"gate_proj", "up_proj", "down_proj"}}};
    return r;
}

struct Preset {
    std::int64_t hidden, intermediate, expert_intermediate, shared_intermediate, layers, experts, top_k, heads,
        kv_heads, head_dim, key_heads, value_heads, key_dim, value_dim, vocab;
};
constexpr Preset tiny{256, 512, 256, 256, 4, 8, 2, 2, 1, 64, 2, 4, 32, 32, 512};
constexpr Preset small{512, 1024, 512, 512, 8, 16, 4, 4, 2, 64, 4, 8, 32, 32, 1024};
constexpr std::int64_t full_attention_interval = 4, conv_kernel = 4;

class Qwen3NextAdapter final : public RuleBasedAdapter {
public:
    Qwen3NextAdapter() : RuleBasedAdapter(qwen3_next_rules()) {}

    std::unique_ptr<DecoderForward> decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                    const ModelPlan& plan) const override {
        return make_qwen3_next_decoder(config, checkpoint, plan);
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const SynthSettings s = read_synth_settings(options, rules().model_types, {"per-expert"});
        const Preset p = s.small ? small : tiny;

        const SynthTokenizer tokenizer = qwen_style_tokenizer(p.vocab);

        SynthModel model;
        model.encoding = s.encoding;
        model.config = config(p, s, tokenizer);
        add_tokenizer_files(model, tokenizer);
        auto& t = model.tensors;
        const std::int64_t H = p.hidden;
        t.push_back(bf16_tensor("model.embed_tokens.weight", {tokenizer.vocab_size, H}));
        for (std::int64_t layer = 0; layer < p.layers; ++layer)
            add_layer(t, "model.layers." + std::to_string(layer) + ".", p, s.fp8,
                      (layer + 1) % full_attention_interval == 0);
        t.push_back(norm_weight("model.norm.weight", H));
        t.push_back(bf16_tensor("lm_head.weight", {tokenizer.vocab_size, H}));
        // The multi-token-prediction module: top level, one full-attention MoE layer.
        t.push_back(linear_weight("mtp.fc.weight", H, 2 * H, s.fp8));
        t.push_back(norm_weight("mtp.pre_fc_norm_embedding.weight", H));
        t.push_back(norm_weight("mtp.pre_fc_norm_hidden.weight", H));
        add_layer(t, "mtp.layers.0.", p, s.fp8, /*full_attention=*/true);
        t.push_back(norm_weight("mtp.norm.weight", H));

        model.shard_count = s.small ? 5 : 3;
        model.shard_name = [](std::size_t n, std::size_t c) { return padded_shard_name(n, c, 5, 5); };
        write_synth_model(model, directory, s.seed);
    }

private:
    static void add_layer(std::vector<SynthTensor>& t, const std::string& l, const Preset& p, bool fp8, bool full) {
        const std::int64_t H = p.hidden;
        // Zero-centred RMSNorms: the stored weights sit near 0 (the layer multiplies by 1 + w).
        t.push_back(bf16_tensor(l + "input_layernorm.weight", {H}));
        if (full) {
            add_gqa_attention(t, l, {H, p.heads, p.kv_heads, p.head_dim, 2 * p.heads * p.head_dim, false, true}, fp8);
        } else {
            const std::string a = l + "linear_attn.";
            const std::int64_t qk = p.key_heads * p.key_dim, v = p.value_heads * p.value_dim;
            t.push_back(linear_weight(a + "in_proj_qkvz.weight", 2 * qk + 2 * v, H, fp8));
            t.push_back(linear_weight(a + "in_proj_ba.weight", 2 * p.value_heads, H, fp8));
            t.push_back(bf16_tensor(a + "conv1d.weight", {2 * qk + v, 1, conv_kernel}));
            t.push_back({a + "dt_bias", DType::BF16, {p.value_heads}, SynthFill::ones, 0.1});
            t.push_back({a + "A_log", DType::BF16, {p.value_heads}, SynthFill::normal, 0.5});
            t.push_back(norm_weight(a + "norm.weight", p.value_dim));
            t.push_back(linear_weight(a + "out_proj.weight", H, v, fp8));
        }
        t.push_back(bf16_tensor(l + "post_attention_layernorm.weight", {H}));
        t.push_back(bf16_tensor(l + "mlp.gate.weight", {p.experts, H}));
        for (std::int64_t e = 0; e < p.experts; ++e)
            add_swiglu(t, l + "mlp.experts." + std::to_string(e) + ".", {"gate_proj", "up_proj", "down_proj"},
                       p.expert_intermediate, H, fp8);
        add_swiglu(t, l + "mlp.shared_expert.", {"gate_proj", "up_proj", "down_proj"}, p.shared_intermediate, H, fp8);
        t.push_back(bf16_tensor(l + "mlp.shared_expert_gate.weight", {1, H}));
    }

    static json::value config(const Preset& p, const SynthSettings& s, const SynthTokenizer& tokenizer) {
        json::object c = base_config(tokenizer.vocab_size, tokenizer.bos_token_id, tokenizer.eos_token_id, s.encoding);
        c["architectures"] = json::array{"Qwen3NextForCausalLM"};
        c["attention_bias"] = false;
        c["decoder_sparse_step"] = 1;
        c["full_attention_interval"] = full_attention_interval;
        c["head_dim"] = p.head_dim;
        c["hidden_size"] = p.hidden;
        c["intermediate_size"] = p.intermediate;
        c["linear_conv_kernel_dim"] = conv_kernel;
        c["linear_key_head_dim"] = p.key_dim;
        c["linear_num_key_heads"] = p.key_heads;
        c["linear_num_value_heads"] = p.value_heads;
        c["linear_value_head_dim"] = p.value_dim;
        c["max_position_embeddings"] = 262144;
        c["mlp_only_layers"] = json::array{};
        c["model_type"] = "qwen3_next";
        c["moe_intermediate_size"] = p.expert_intermediate;
        c["norm_topk_prob"] = true;
        c["num_attention_heads"] = p.heads;
        c["num_experts"] = p.experts;
        c["num_experts_per_tok"] = p.top_k;
        c["num_hidden_layers"] = p.layers;
        c["num_key_value_heads"] = p.kv_heads;
        c["output_router_logits"] = false;
        c["partial_rotary_factor"] = 0.25;
        c["rms_norm_eps"] = 1e-06;
        c["rope_scaling"] = nullptr;
        c["rope_theta"] = 10000000.0;
        c["router_aux_loss_coef"] = 0.001;
        c["shared_expert_intermediate_size"] = p.shared_intermediate;
        c["use_sliding_window"] = false;
        return c;
    }
};

}  // namespace

MOEQUANT_PLUGIN("qwen3_next", "0.1.0", MOEQUANT_KIND_ADAPTER, "Qwen3-Next family adapter") {
    registrar.add(std::make_unique<Qwen3NextAdapter>());
}
