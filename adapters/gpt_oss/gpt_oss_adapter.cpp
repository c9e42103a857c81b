// gpt-oss-20b / -120b (model-families-2026.md §3.7, §2.1), the Hugging Face layout only:
// fused MXFP4 experts `model.layers.L.mlp.experts.{gate_up_proj,down_proj}_{blocks,scales}`
// (the mxfp4 encoding decodes them as the weights `…gate_up_proj` [E, 2I, H] and `…down_proj`
// [E, H, I], layout A rows) with BF16 biases `…_bias` [E, 2I] / [E, H]; gate_up rows interleaved
// (row 2j gate j, row 2j + 1 up j: slices with step 2); `num_local_experts`, `intermediate_size`
// as the expert size, `num_experts_per_tok` (or `experts_per_token`); every layer MoE; router
// `mlp.router.{weight,bias}`; attention with biases and `self_attn.sinks`. The release's
// `original/` and `metal/` copies are never read: the plan follows the checkpoint's index.
//
// What it can become (§5.5): kt-kernel's AMX formats have no place for expert biases or the
// clamped (up + 1) · σ(1.702 · gate) activation, so kt-safetensors/kt-tree refuse the plan (they
// refuse routed-expert tensors that are no expert's weight: the biases); `bf16-safetensors`
// writes transformers' dequantized layout; `gguf` llama.cpp's gpt-oss (docs/gguf-format.md). The router (bias added to the logits, softmax over
// the top-k logits) is reported but its tensors are not recorded: routed-only calibration
// would ignore the bias, so it refuses. No calibration forward (the default refuses).

#include "rule_based_adapter.hpp"
#include "synth/synth_mxfp4.hpp"
#include "synth/family_checkpoint.hpp"
#include "synth/synth_random.hpp"

#include <moequant/error.hpp>
#include <moequant/plugin.hpp>

#include <boost/json.hpp>

namespace moequant::adapters {
namespace {

FamilyRules gpt_oss_rules() {
    FamilyRules r = family_rules("gpt-oss-20b/120b: fused MXFP4 experts with biases, interleaved gate/up (BF16 export only)",
                                 {"gpt_oss"}, {"GptOssForCausalLM"}, mixtral_expert_keys());
    r.top_k_keys = {"num_experts_per_tok", "experts_per_token"};
    // Softmax over the top-k logits = softmax over all, top-k, renormalized (the bias is not expressible).
    r.router = &renormalized_softmax_router;
    r.router_weights = {};  // not recorded: routing without the logit bias would misroute
    r.unmodelled_routing = {{.warning = "gpt-oss routing adds the router bias to the logits, which the plan cannot express: "
                                       "it records no router, so routed-only calibration is refused",
                             .forward_hint = "convert --format gguf (llama.cpp's gpt-oss, MXFP4 experts as stored) or "
                                             "--format bf16-safetensors converts it without calibration"}};
    r.interleaved_gate_up = true;
    r.layer_prefixes = {"model.layers."};
    return r;
}

constexpr SynthSizes tiny{256, 2, 4, 2, 256, 4, 1, 64, 512};
constexpr SynthSizes small{512, 4, 8, 4, 512, 8, 2, 64, 1024};

// A fused MXFP4 weight as the HF release stores it: `<stem>_blocks` U8 [E, R, K/32, 16] and
// `<stem>_scales` U8 [E, R, K/32], from N(0, 0.02²) values drawn per stem.
void add_mxfp4_fused(std::vector<SynthTensor>& t, const std::string& stem, std::int64_t experts, std::int64_t rows,
                     std::int64_t cols) {
    auto packed = [=](std::uint64_t seed, bool scales) {
        SynthRandom random(seed, stem);
        std::vector<std::uint8_t> out;
        for (std::int64_t e = 0; e < experts; ++e) {
            std::vector<float> w(static_cast<std::size_t>(rows * cols));
            for (auto& x : w) x = static_cast<float>(0.02 * random.normal());
            PackedMxfp4 p = pack_mxfp4(w, {rows, cols});
            const auto& part = scales ? p.scales : p.codes;
            out.insert(out.end(), part.begin(), part.end());
        }
        return out;
    };
    SynthTensor blocks{stem + "_blocks", DType::U8, {experts, rows, cols / 32, 16}, SynthFill::zeros, 0.0};
    blocks.bytes = [=](std::uint64_t seed) { return packed(seed, false); };
    SynthTensor scales{stem + "_scales", DType::U8, {experts, rows, cols / 32}, SynthFill::zeros, 0.0};
    scales.bytes = [=](std::uint64_t seed) { return packed(seed, true); };
    t.push_back(std::move(blocks));
    t.push_back(std::move(scales));
}

class GptOssAdapter final : public RuleBasedAdapter {
public:
    GptOssAdapter() : RuleBasedAdapter(gpt_oss_rules()) {}

    void add_warnings(const ModelConfig&, ModelPlan& plan) const override {
        plan.warnings.push_back(
            "gpt-oss experts have biases and a clamped SwiGLU with (up + 1): kt-kernel's AMX formats cannot hold "
            "them (kt-safetensors and kt-tree refuse); --format gguf writes llama.cpp's gpt-oss, --format "
            "bf16-safetensors transformers' layout");
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const SynthSettings s = read_synth_settings(options, rules().model_types, {"fused-linear"});
        if (s.encoding != SynthEncoding::mxfp4)
            throw_usage_error("gpt-oss checkpoints store their experts in MXFP4: synth it with --dtype mxfp4");
        const SynthSizes& p = s.small ? small : tiny;

        const SynthTokenizer tokenizer = make_synth_tokenizer({.vocab_size = p.vocab,
                                                               .special_tokens = {"<|startoftext|>", "<|endoftext|>", "<|return|>"},
                                                               .bos_token = "<|startoftext|>",
                                                               .eos_token = "<|return|>"});
        const std::int64_t H = p.hidden, I = p.expert_intermediate, E = p.experts, q_rows = p.heads * p.head_dim,
                           kv_rows = p.kv_heads * p.head_dim;
        FamilyCheckpoint checkpoint{.tokenizer = tokenizer, .config = config(p, tokenizer), .hidden = H, .layers = p.layers};
        checkpoint.encoding = SynthEncoding::bf16;  // the MXFP4 tensors are written as bytes below
        checkpoint.layer = [&](std::vector<SynthTensor>& t, const std::string& l, std::int64_t) {
            t.push_back(norm_weight(l + "input_layernorm.weight", H));
            const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> projections[] = {
                {"q_proj", {q_rows, H}}, {"k_proj", {kv_rows, H}}, {"v_proj", {kv_rows, H}}, {"o_proj", {H, q_rows}}};
            for (const auto& [name, shape] : projections) {
                t.push_back(bf16_tensor(l + "self_attn." + name + ".weight", {shape.first, shape.second}));
                t.push_back(bf16_tensor(l + "self_attn." + name + ".bias", {shape.first}));
            }
            t.push_back(bf16_tensor(l + "self_attn.sinks", {p.heads}, 0.5));
            t.push_back(norm_weight(l + "post_attention_layernorm.weight", H));
            t.push_back(bf16_tensor(l + "mlp.router.weight", {E, H}));
            t.push_back(bf16_tensor(l + "mlp.router.bias", {E}));
            add_mxfp4_fused(t, l + "mlp.experts.gate_up_proj", E, 2 * I, H);
            t.push_back(bf16_tensor(l + "mlp.experts.gate_up_proj_bias", {E, 2 * I}));
            add_mxfp4_fused(t, l + "mlp.experts.down_proj", E, H, I);
            t.push_back(bf16_tensor(l + "mlp.experts.down_proj_bias", {E, H}));
        };
        // gpt-oss-20b's shards count from zero: model-00000-of-00002 ... model-00002-of-00002.
        checkpoint.shard_count = s.small ? 5 : 3;
        checkpoint.shard_name = [](std::size_t n, std::size_t c) { return padded_shard_name(n - 1, c - 1, 5, 5); };
        write_family_checkpoint(checkpoint, directory, s);
    }

private:
    static json::value config(const SynthSizes& p, const SynthTokenizer& tokenizer) {
        json::object c = family_config(tokenizer, SynthEncoding::bf16, p, mixtral_expert_keys(), {"gpt_oss", "GptOssForCausalLM"});
        c.erase("hidden_act");
        c["experts_per_token"] = p.top_k;
        json::array types;
        for (std::int64_t l = 0; l < p.layers; ++l) types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
        c["layer_types"] = std::move(types);
        c["sliding_window"] = 128;
        c["attention_bias"] = true;
        c["swiglu_limit"] = 7.0;
        c["rope_theta"] = 150000.0;
        c["rope_scaling"] = json::object{{"rope_type", "yarn"},
                                         {"factor", 32.0},
                                         {"beta_fast", 32.0},
                                         {"beta_slow", 1.0},
                                         {"original_max_position_embeddings", 4096},
                                         {"truncate", false}};
        c["initial_context_length"] = 4096;
        c["max_position_embeddings"] = 131072;
        c["rms_norm_eps"] = 1e-05;
        c["router_aux_loss_coef"] = 0.9;
        c["output_router_logits"] = false;
        c["quantization_config"] = json::object{
            {"quant_method", "mxfp4"},
            {"modules_to_not_convert",
             json::array{"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}};
        return c;
    }
};

}  // namespace
}  // namespace moequant::adapters

MOEQUANT_PLUGIN("gpt_oss", "0.1.0", MOEQUANT_KIND_ADAPTER, "gpt-oss family adapter (fused MXFP4 experts with biases)") {
    registrar.add(std::make_unique<moequant::adapters::GptOssAdapter>());
}
