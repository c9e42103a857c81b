// DeepSeek-V4-Flash (model-families-2026.md §3.8): DeepSeek's own tensor names, no "model."
// prefix: routed experts `layers.L.ffn.experts.E.{w1,w3,w2}` (gate, up, down) in MXFP4 (I8
// `.weight` + E8M0 `.scale`, announced by `expert_dtype: fp4`; the mxfp4 encoding decodes them),
// `n_routed_experts`, `moe_intermediate_size`, every layer MoE, one shared expert
// (`ffn.shared_experts`), `mtp.*` skipped. Non-expert weights are block FP8 with a 2-D `.scale`
// (the fp8 encoding reads them) or BF16.
//
// Decisions where the facts stop:
// - The router is not modelled: scores are sqrt(softplus(logits)) with a correction bias in
//   layers >= num_hash_layers, and layers 0..num_hash_layers-1 route by a token -> experts table
//   (`ffn.gate.tid2eid`); RouterSpec can express neither. The plan records top-k, scaling and
//   normalization for the report but no router tensors, so routed-only calibration refuses
//   every layer; there is no calibration forward either (the default decoder_forward refuses).
// - Attention, compressor and hyper-connection tensors are not all named by the spec: `attn.*`
//   is attention, `hc_*` and anything else unknown is "other" and warned about.
// - kt-kernel's AMX INT4/INT8 methods refuse a non-zero swiglu_limit, so experts converted to
//   them lose the clamp; the plan warns (convert and inspect print it).

#include "rule_based_adapter.hpp"
#include "synth/family_checkpoint.hpp"
#include "synth/synth_blocks.hpp"

#include <moequant/error.hpp>
#include <moequant/plugin.hpp>

#include <boost/json.hpp>

#include <cstring>
#include <sstream>

namespace moequant::adapters {
namespace {

FamilyRules deepseek_v4_rules() {
    FamilyRules r = family_rules(
        "DeepSeek-V4-Flash: layers.L.ffn.experts w1/w3/w2 in MXFP4, hash-routed first layers, mtp.* skipped", {"deepseek_v4"},
        {"DeepseekV4ForCausalLM"}, deepseek_expert_keys());
    r.router = [](const ModelConfig& c, std::int64_t k) {
        RouterSpec spec = softmax_router(c, k, true);  // scoring not representable: see above
        if (auto v = c.find("routed_scaling_factor"); v && !v->is_null()) spec.scaling = v->as_double();
        spec.bf16_logits = false;
        return spec;
    };
    r.router_weights = {};  // not recorded: routed-only calibration must refuse, not misroute
    r.unmodelled_routing = {{.warning = "DeepSeek-V4 routing (sqrt-softplus scores, hash-routed layers below num_hash_layers) "
                                       "is not modelled: the plan records no router, so routed-only calibration is refused",
                             .forward_hint = "quantize without calibration: --quant_method RTN"}};
    r.namings = {{"ffn.experts", {"w1", "w3", "w2"}}};
    r.layer_prefixes = {"layers."};
    return r;
}

struct Preset : SynthSizes {
    std::int64_t hash_layers, q_lora, o_groups, o_lora, hc;
    std::int64_t rope_dim, index_heads, index_head_dim;
};
// Sizes llama.cpp's deepseek4 loader and kernels accept: one KV head (DeepSeek-V4's attention
// shares a single key-value head), hc_mult 4, heads divisible by o_groups, an index head of 64
// (a power of two >= 64 for the indexer's Hadamard rotation) unlike the head_dim of 128, and
// every FP8 / MXFP4 row a multiple of 32.
constexpr Preset tiny{{256, 4, 4, 2, 256, 4, 1, 128, 512}, 3, 64, 2, 64, 4, 32, 4, 64};
constexpr Preset small{{512, 6, 8, 2, 512, 8, 1, 128, 1024}, 3, 128, 4, 128, 4, 32, 8, 64};

// The release's compress_ratios (one per layer plus the MTP layer): 0 for the first two layers
// and the MTP layer, then 4 (compressed sparse attention with the lightning indexer) and 128
// (heavily compressed attention) alternating.
std::int64_t compress_ratio(const Preset& p, std::int64_t layer) {
    return layer < 2 || layer >= p.layers ? 0 : layer % 2 ? 128 : 4;
}

class DeepseekV4Adapter final : public RuleBasedAdapter {
public:
    DeepseekV4Adapter() : RuleBasedAdapter(deepseek_v4_rules()) {}

    void add_warnings(const ModelConfig& config, ModelPlan& plan) const override {
        const double limit = [&] {
            auto v = config.find("swiglu_limit");
            return v && !v->is_null() ? v->as_double() : 0.0;
        }();
        if (limit > 0)
            plan.warnings.push_back("kt-kernel's AMX INT4/INT8 methods do not apply DeepSeek-V4's swiglu_limit clamp (" +
                                    [&] {
                                        std::ostringstream o;
                                        o << limit;
                                        return o.str();
                                    }() +
                                    "): experts converted to kt-safetensors/kt-tree run unclamped (kt's MXFP4 "
                                    "method runs the source experts with the clamp)");
    }

    void synthesize(const std::filesystem::path& directory, const Options& options) const override {
        const SynthSettings s = read_synth_settings(options, rules().model_types, {"per-expert"});
        if (s.encoding != SynthEncoding::bf16 && s.encoding != SynthEncoding::mxfp4)
            throw_usage_error("DeepSeek-V4 synth writes --dtype mxfp4 (the release: MXFP4 experts) or bf16");
        const Preset p = s.small ? small : tiny;

        const SynthTokenizer tokenizer = make_synth_tokenizer(
            {.vocab_size = p.vocab,
             .special_tokens = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"},
             .bos_token = "<｜begin▁of▁sentence｜>",
             .eos_token = "<｜end▁of▁sentence｜>"});
        const std::int64_t H = p.hidden, V = tokenizer.vocab_size, D = p.head_dim;
        // --dtype mxfp4 is the release: routed experts MXFP4 (the model's encoding), the other
        // linears of attention, indexer and shared expert block FP8 with E8M0 `.scale`s.
        const bool q = s.fp8;
        auto linear = [&](std::vector<SynthTensor>& t, const std::string& name, std::int64_t out, std::int64_t in) {
            t.push_back(linear_weight(name, out, in, q, SynthEncoding::fp8_block_e8m0));
        };
        auto f32 = [](std::vector<SynthTensor>& t, const std::string& name, Shape shape, SynthFill fill = SynthFill::normal) {
            t.push_back({name, DType::F32, std::move(shape), fill, 0.02});
        };
        // Hyper-connections: a layer's mix `rows` = (2 + hc)·hc with 3 scales, the head's hc with 1.
        auto hyper_connection = [&](std::vector<SynthTensor>& t, const std::string& stem, std::int64_t rows, std::int64_t scales) {
            f32(t, stem + "_fn", {rows, p.hc * H});
            f32(t, stem + "_base", {rows});
            f32(t, stem + "_scale", {scales}, SynthFill::ones);
        };
        // KV compression of `width` = coff·head: F32 positional bias `ape` (no `.weight`), BF16
        // wkv / wgate and a norm over the head.
        auto compressor = [&](std::vector<SynthTensor>& t, const std::string& c, std::int64_t ratio, std::int64_t width,
                              std::int64_t head) {
            f32(t, c + "ape", {ratio, width});
            t.push_back(bf16_tensor(c + "wkv.weight", {width, H}));
            t.push_back(bf16_tensor(c + "wgate.weight", {width, H}));
            t.push_back(norm_weight(c + "norm.weight", head));
        };
        FamilyCheckpoint checkpoint{.tokenizer = tokenizer, .config = config(p, s, tokenizer), .hidden = H, .root = "",
                                    .embedding = "embed.weight", .head = "head.weight", .layers = p.layers};
        checkpoint.layer = [&](std::vector<SynthTensor>& t, const std::string& l, std::int64_t layer) {
            t.push_back(norm_weight(l + "attn_norm.weight", H));
            linear(t, l + "attn.wq_a.weight", p.q_lora, H);
            t.push_back(norm_weight(l + "attn.q_norm.weight", p.q_lora));
            linear(t, l + "attn.wq_b.weight", p.heads * D, p.q_lora);
            linear(t, l + "attn.wkv.weight", D, H);
            t.push_back(norm_weight(l + "attn.kv_norm.weight", D));
            linear(t, l + "attn.wo_a.weight", p.o_groups * p.o_lora, p.heads * D / p.o_groups);
            linear(t, l + "attn.wo_b.weight", H, p.o_groups * p.o_lora);
            f32(t, l + "attn.attn_sink", {p.heads});
            if (const std::int64_t ratio = compress_ratio(p, layer); ratio != 0) {
                compressor(t, l + "attn.compressor.", ratio, (ratio == 4 ? 2 : 1) * D, D);
                if (ratio == 4) {  // the lightning indexer of compressed sparse attention
                    const std::string i = l + "attn.indexer.";
                    linear(t, i + "wq_b.weight", p.index_heads * p.index_head_dim, p.q_lora);
                    t.push_back(bf16_tensor(i + "weights_proj.weight", {p.index_heads, H}));
                    compressor(t, i + "compressor.", 4, 2 * p.index_head_dim, p.index_head_dim);
                }
            }
            hyper_connection(t, l + "hc_attn", (2 + p.hc) * p.hc, 3);
            t.push_back(norm_weight(l + "ffn_norm.weight", H));
            t.push_back(bf16_tensor(l + "ffn.gate.weight", {p.experts, H}));
            if (layer < p.hash_layers) t.push_back(hash_table(l + "ffn.gate.tid2eid", V, p.top_k, p.experts));
            else f32(t, l + "ffn.gate.bias", {p.experts});
            for (std::int64_t e = 0; e < p.experts; ++e)
                add_swiglu(t, l + "ffn.experts." + std::to_string(e) + ".", {"w1", "w3", "w2"}, p.expert_intermediate, H, q);
            const std::string shared = l + "ffn.shared_experts.";
            linear(t, shared + "w1.weight", p.expert_intermediate, H);
            linear(t, shared + "w3.weight", p.expert_intermediate, H);
            linear(t, shared + "w2.weight", H, p.expert_intermediate);
            hyper_connection(t, l + "hc_ffn", (2 + p.hc) * p.hc, 3);
        };
        checkpoint.after_head = [&](std::vector<SynthTensor>& t) {
            hyper_connection(t, "hc_head", p.hc, 1);
            // One MTP block (num_nextn_predict_layers 1): never converted or copied.
            t.push_back(norm_weight("mtp.0.enorm.weight", H));
            t.push_back(norm_weight("mtp.0.hnorm.weight", H));
            t.push_back(bf16_tensor("mtp.0.e_proj.weight", {H, H}));
            t.push_back(bf16_tensor("mtp.0.ffn.gate.weight", {p.experts, H}));
            t.push_back(norm_weight("mtp.0.norm.weight", H));
        };
        checkpoint.shard_count = s.small ? 5 : 3;
        write_family_checkpoint(checkpoint, directory, s);
    }

private:
    // I64 [vocab, top_k]: token t routes to experts (t + j) mod E, j < top_k (distinct for k <= E).
    static SynthTensor hash_table(std::string name, std::int64_t vocab, std::int64_t top_k, std::int64_t experts) {
        SynthTensor t{std::move(name), DType::I64, {vocab, top_k}, SynthFill::zeros, 0.0};
        t.bytes = [=](std::uint64_t) {
            std::vector<std::uint8_t> out(static_cast<std::size_t>(vocab * top_k * 8));
            for (std::int64_t i = 0; i < vocab; ++i)
                for (std::int64_t j = 0; j < top_k; ++j) {
                    const std::int64_t expert = (i + j) % experts;
                    std::memcpy(out.data() + (i * top_k + j) * 8, &expert, 8);
                }
            return out;
        };
        return t;
    }

    static json::value config(const Preset& p, const SynthSettings& s, const SynthTokenizer& tokenizer) {
        json::object c = family_config(tokenizer, s.encoding, p, deepseek_expert_keys(), {"deepseek_v4", "DeepseekV4ForCausalLM"});
        // The release's block-FP8 quantization_config next to expert_dtype fp4 (base_config's).
        if (s.encoding == SynthEncoding::mxfp4) c["quantization_config"] = quantization_config(SynthEncoding::fp8_block_e8m0);
        c["qk_rope_head_dim"] = p.rope_dim;
        c["q_lora_rank"] = p.q_lora;
        c["o_groups"] = p.o_groups;
        c["o_lora_rank"] = p.o_lora;
        c["n_shared_experts"] = 1;
        c["num_hash_layers"] = p.hash_layers;
        c["scoring_func"] = "sqrtsoftplus";
        c["topk_method"] = "noaux_tc";
        c["norm_topk_prob"] = true;
        c["routed_scaling_factor"] = 1.5;
        c["swiglu_limit"] = 10.0;
        c["sliding_window"] = 128;
        json::array ratios;
        for (std::int64_t l = 0; l <= p.layers; ++l) ratios.push_back(compress_ratio(p, l));
        c["compress_ratios"] = std::move(ratios);
        c["compress_rope_theta"] = 160000.0;
        c["rope_theta"] = 10000.0;
        c["rope_scaling"] = json::object{{"type", "yarn"},  {"factor", 16.0}, {"original_max_position_embeddings", 65536},
                                         {"beta_fast", 32}, {"beta_slow", 1}};
        c["max_position_embeddings"] = 1048576;
        c["hc_mult"] = p.hc;
        c["hc_sinkhorn_iters"] = 20;
        c["hc_eps"] = 1e-06;
        c["index_n_heads"] = p.index_heads;
        c["index_head_dim"] = p.index_head_dim;
        c["index_topk"] = 16;
        c["num_nextn_predict_layers"] = 1;
        c["rms_norm_eps"] = 1e-06;
        return c;
    }
};

}  // namespace
}  // namespace moequant::adapters

MOEQUANT_PLUGIN("deepseek_v4", "0.1.0", MOEQUANT_KIND_ADAPTER, "DeepSeek-V4-Flash family adapter (MXFP4 experts)") {
    registrar.add(std::make_unique<moequant::adapters::DeepseekV4Adapter>());
}
