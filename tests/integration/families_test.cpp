// Every family: `moequant synth` then `moequant inspect --json --plan --tensors`, and the plan
// checked against the family's rules as model-families.md states them — recomputed here from
// the written config.json, never taken from the adapter's own output.

#include "error_code_of.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/engine/plugin_registry.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <set>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

struct Case {
    std::string family;   // --family: the model_type whose rules the plan follows
    std::string dtype;    // bf16 | fp8 | fp8-channel | int4-ct
    std::string layout;   // per-expert | fused-linear | fused-bmm | mistral-native
    std::string shard_pattern;
    std::string release = {};  // --family instead: a release of that model_type (minimax_m27, kimi_k26)
};

// The family's naming of routed experts: where projection p of expert e in layer l lives.
struct Naming {
    std::string layer_prefix;                // "model.layers."
    std::string experts;                     // "mlp.experts"
    std::array<std::string, 3> projections;  // gate, up, down
    std::string router;                      // relative to the layer prefix
    std::string router_bias = "mlp.gate.e_score_correction_bias";
};

// The families whose rules are DeepSeek-V3's (model-families.md §5.1, model-families-2026.md §3.1, §3.2, §3.4).
bool deepseek_like(const std::string& family) {
    return family == "deepseek_v3" || family == "kimi_k2" || family == "deepseek_v32" || family == "kimi_k25" ||
           family == "glm_moe_dsa";
}

// DeepSeek-V3.2 and GLM-5: a lightning indexer beside MLA (model-families-2026.md §3.1, §3.4).
bool sparse_attention(const std::string& family) { return family == "deepseek_v32" || family == "glm_moe_dsa"; }

Naming naming_for(const Case& c) {
    if (c.family == "mixtral" && c.layout == "mistral-native") return {"layers.", "experts", {"w1", "w3", "w2"}, "gate.weight"};
    if (c.family == "mixtral" && c.layout == "per-expert")
        return {"model.layers.", "block_sparse_moe.experts", {"w1", "w3", "w2"}, "block_sparse_moe.gate.weight"};
    if (c.family == "kimi_k25")
        return {"language_model.model.layers.", "mlp.experts", {"gate_proj", "up_proj", "down_proj"}, "mlp.gate.weight"};
    if (c.family == "minimax_m3")  // model-families: a VLM around M2's expert naming
        return {"language_model.model.layers.", "block_sparse_moe.experts", {"w1", "w3", "w2"}, "block_sparse_moe.gate.weight",
                "block_sparse_moe.e_score_correction_bias"};
    if (c.family == "minimax_m2")
        return {"model.layers.", "block_sparse_moe.experts", {"w1", "w3", "w2"}, "block_sparse_moe.gate.weight",
                "block_sparse_moe.e_score_correction_bias"};
    if (c.family == "qwen3_vl_moe" || c.family == "qwen3_5_moe")
        return {"model.language_model.layers.", "mlp.experts", {"gate_proj", "up_proj", "down_proj"}, "mlp.gate.weight"};
    return {"model.layers.", "mlp.experts", {"gate_proj", "up_proj", "down_proj"}, "mlp.gate.weight"};
}

// The language model's settings (Qwen3-VL-MoE, Qwen3.5-MoE, Kimi-K2.5 nest them under text_config).
const json::object& text_config(const json::object& config) {
    if (auto* t = config.if_contains("text_config")) return t->as_object();
    return config;
}

std::int64_t get(const json::object& o, const char* key) { return o.at(key).to_number<std::int64_t>(); }

// model-families.md §1: which decoder layers carry routed experts.
std::vector<std::int64_t> expected_moe_layers(const std::string& family, const json::object& cfg) {
    std::vector<std::int64_t> layers;
    const std::int64_t n = get(cfg, "num_hidden_layers");
    for (std::int64_t l = 0; l < n; ++l) {
        bool moe = true;
        if (deepseek_like(family) || family == "glm4_moe") moe = l >= get(cfg, "first_k_dense_replace");
        // GLM-5 (GlmMoeDsaConfig): mlp_layer_types decides where present.
        if (family == "glm_moe_dsa" && cfg.contains("mlp_layer_types"))
            moe = cfg.at("mlp_layer_types").as_array().at(static_cast<std::size_t>(l)).as_string() == "sparse";
        // MiniMax-M3: moe_layer_freq lists 0 (dense) or 1 (MoE) per layer.
        if (family == "minimax_m3") moe = cfg.at("moe_layer_freq").as_array().at(static_cast<std::size_t>(l)).to_number<std::int64_t>() != 0;
        if (family == "qwen3_next" || family == "qwen3_moe" || family == "qwen3_vl_moe") {
            for (const auto& v : cfg.at("mlp_only_layers").as_array())
                if (v.to_number<std::int64_t>() == l) moe = false;
            moe = moe && (l + 1) % get(cfg, "decoder_sparse_step") == 0;
        }
        if (moe) layers.push_back(l);
    }
    return layers;
}

std::int64_t expected_experts(const std::string& family, const json::object& cfg) {
    if (family == "mixtral" || family == "minimax_m2" || family == "minimax_m3") return get(cfg, "num_local_experts");
    if (family == "qwen3_next" || family == "qwen3_moe" || family == "qwen3_vl_moe" || family == "qwen3_5_moe")
        return get(cfg, "num_experts");
    return get(cfg, "n_routed_experts");
}

std::int64_t expected_expert_size(const std::string& family, const json::object& cfg) {
    return family == "mixtral" || family == "minimax_m2" || family == "minimax_m3" ? get(cfg, "intermediate_size")
                                                                                   : get(cfg, "moe_intermediate_size");
}

std::int64_t vocabulary_of(const fs::path& tokenizer_json) {
    auto doc = json::parse(read_text(tokenizer_json)).as_object();
    std::set<std::int64_t> ids;
    for (const auto& kv : doc.at("model").at("vocab").as_object()) ids.insert(kv.value().to_number<std::int64_t>());
    for (const auto& t : doc.at("added_tokens").as_array()) ids.insert(t.at("id").to_number<std::int64_t>());
    BOOST_TEST(*ids.rbegin() + 1 == static_cast<std::int64_t>(ids.size()));  // ids 0..V-1, no gaps
    return static_cast<std::int64_t>(ids.size());
}

std::vector<std::int64_t> shape_of(const json::value& v) {
    std::vector<std::int64_t> s;
    for (const auto& d : v.as_array()) s.push_back(d.to_number<std::int64_t>());
    return s;
}

// What a release's config.json says where it differs from its model_type's (docs/families.md,
// "Releases"), and the synth marker naming the release.
void check_release(const Case& c, const fs::path& out, const json::object& cfg, const json::object& plan) {
    if (!c.release.empty())  // detected as its model_type's family: the release leaves no trace in the files
        BOOST_TEST(std::string(plan.at("family").as_string()) == (c.family == "minimax_m2" ? "minimax_m2" : "deepseek_v3"));
    const auto marker = json::parse(read_text(out / ".moequant-synth.json")).as_object();
    const json::value* release = marker.if_contains("release");
    BOOST_TEST((release ? std::string(release->as_string()) : std::string()) == c.release);
    if (c.family == "minimax_m2")  // MiniMax-M2/M2.1/M2.5: 196608; M2.7: 204800
        BOOST_TEST(get(cfg, "max_position_embeddings") == (c.release == "minimax_m27" ? 204800 : 196608));
    if (c.family == "kimi_k25") {  // Kimi-K2.6: 256K positions, YaRN factor 64
        const bool k26 = c.release == "kimi_k26";
        BOOST_TEST(get(cfg, "max_position_embeddings") == (k26 ? 262144 : 131072));
        BOOST_TEST(cfg.at("rope_scaling").at("factor").to_number<double>() == (k26 ? 64.0 : 32.0));
    }
    if (c.release == "kimi_k26") {  // the vision tower in the last shard, as K2.6's 64th holds it
        const json::value index = json::parse(read_text(out / "model.safetensors.index.json"));
        std::set<std::string> shards, vision_shards;
        for (const auto& kv : index.at("weight_map").as_object()) {
            shards.insert(std::string(kv.value().as_string()));
            if (kv.key().starts_with("vision_tower.")) vision_shards.insert(std::string(kv.value().as_string()));
        }
        BOOST_TEST((vision_shards == std::set<std::string>{*shards.rbegin()}));
    }
}

void check_family(const Case& c) {
    TempDir dir;
    const fs::path out = dir / "ckpt";
    auto synth = run_moequant({"synth", "--family", c.release.empty() ? c.family : c.release, "--dtype", c.dtype, "--layout",
                               c.layout, "--out", out.string()});
    BOOST_REQUIRE_MESSAGE(synth.exit_code == 0, synth.err);
    auto inspected = run_moequant({"inspect", "--json", "--plan", "--tensors", out.string()});
    BOOST_REQUIRE_MESSAGE(inspected.exit_code == 0, inspected.err);
    const auto report = json::parse(inspected.out).as_object();
    const auto& plan = report.at("plan").as_object();
    const auto config_doc = json::parse(read_text(out / "config.json")).as_object();
    const auto& cfg = text_config(config_doc);
    check_release(c, out, cfg, plan);
    const bool fp8 = c.dtype == "fp8";
    const bool int4 = c.dtype == "int4-ct";  // compressed-tensors pack-quantized routed experts
    // GLM-4.5/4.6/4.7-FP8 (model-families-2026.md §2.3, §3.3): compressed-tensors float-quantized,
    // one scale per output channel ([N, 1]) and a static input_scale that is never read.
    const bool channel = c.dtype == "fp8-channel";
    const bool mx = c.dtype == "mxfp8";  // MiniMax-M3-MXFP8: E4M3 with a U8 (E8M0) scale per 32 of a row
    const Naming naming = naming_for(c);
    const std::int64_t H = get(cfg, "hidden_size"), I = expected_expert_size(c.family, cfg),
                       E = expected_experts(c.family, cfg), layers = get(cfg, "num_hidden_layers");

    // Side files, tokenizer size and the shard naming of the real models.
    for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                          "generation_config.json", "model.safetensors.index.json"})
        BOOST_TEST(fs::exists(out / f), f);
    BOOST_TEST(vocabulary_of(out / "tokenizer.json") == get(cfg, "vocab_size"));
    const auto index = json::parse(read_text(out / "model.safetensors.index.json")).as_object();
    std::set<std::string> shards;
    for (const auto& kv : index.at("weight_map").as_object()) shards.insert(std::string(kv.value().as_string()));
    for (const auto& s : shards) BOOST_TEST(std::regex_match(s, std::regex(c.shard_pattern)), s);

    // Every tensor, with its shape, dtype and role.
    std::map<std::string, json::object> tensors;
    for (const auto& t : report.at("tensor_list").as_array()) tensors[std::string(t.at("name").as_string())] = t.as_object();
    std::map<std::string, std::string> roles;
    for (const auto& kv : plan.at("tensor_roles").as_object()) roles[std::string(kv.key())] = std::string(kv.value().as_string());
    BOOST_TEST(roles.size() == tensors.size());
    auto role = [&](const std::string& name) { return roles.count(name) ? roles[name] : std::string("(absent)"); };
    auto shape = [&](const std::string& name) {
        BOOST_REQUIRE_MESSAGE(tensors.count(name), "missing tensor " << name);
        return shape_of(tensors[name].at("shape"));
    };
    auto dtype = [&](const std::string& name) { return std::string(tensors.at(name).at("dtype").as_string()); };

    // The MoE layers, experts and their sources.
    auto moe_layers = expected_moe_layers(c.family, cfg);
    BOOST_TEST(shape_of(plan.at("moe_layers")) == moe_layers, boost::test_tools::per_element());
    BOOST_TEST(get(plan, "num_experts") == E);
    BOOST_TEST(get(plan, "expert_intermediate_size") == I);
    BOOST_TEST(get(plan, "hidden_size") == H);
    // The router, as model-families.md §5 describes each family's.
    const auto& router = plan.at("router").as_object();
    // MiniMax-M2 (model-families-2026.md §3.5): sigmoid + bias, always renormalized, no groups or
    // scaling keys in its config.
    // MiniMax-M3 routes as M2 does, its routed output scaled by routed_scaling_factor.
    const bool m3 = c.family == "minimax_m3";
    const bool minimax = c.family == "minimax_m2" || m3;
    // Qwen3.5-MoE (model-families-2026.md §3.6): every layer MoE, always renormalized, and its text
    // config has none of the keys that would say otherwise.
    const bool qwen3_5 = c.family == "qwen3_5_moe";
    const bool grouped_sigmoid = deepseek_like(c.family) || c.family == "glm4_moe";
    const bool sigmoid_router = grouped_sigmoid || minimax;
    BOOST_TEST(std::string(router.at("scoring").as_string()) == (sigmoid_router ? "sigmoid" : "softmax"));
    BOOST_TEST(get(router, "top_k") == get(cfg, "num_experts_per_tok"));
    BOOST_TEST(router.at("bias").as_bool() == (minimax ? cfg.at("use_routing_bias").as_bool() : sigmoid_router));
    BOOST_TEST(router.at("normalize").as_bool() ==
               (c.family == "mixtral" || minimax || qwen3_5 || cfg.at("norm_topk_prob").as_bool()));
    BOOST_TEST(get(router, "groups") == (grouped_sigmoid ? get(cfg, "n_group") : 1));
    BOOST_TEST(get(router, "groups_kept") == (grouped_sigmoid ? get(cfg, "topk_group") : 1));
    BOOST_TEST(router.at("scaling").to_number<double>() ==
               (grouped_sigmoid || m3 ? cfg.at("routed_scaling_factor").to_number<double>() : 1.0));
    const auto& planned = plan.at("layers").as_array();
    BOOST_REQUIRE(planned.size() == moe_layers.size());
    std::size_t layer_index = 0;
    for (std::int64_t l : moe_layers) {
        const auto& layer = planned[layer_index++].as_object();
        BOOST_TEST(get(layer, "layer") == l);
        const auto& experts = layer.at("experts").as_array();
        BOOST_REQUIRE(static_cast<std::int64_t>(experts.size()) == E);
        const std::string lp = naming.layer_prefix + std::to_string(l) + ".";
        BOOST_TEST(role(lp + naming.router) == "router");
        BOOST_TEST(std::string(layer.at("router_weight").as_string()) == lp + naming.router);
        const std::string bias(layer.at("router_bias").as_string());
        BOOST_TEST(bias == (sigmoid_router ? lp + naming.router_bias : std::string()));
        if (sigmoid_router) BOOST_TEST(shape(bias) == std::vector<std::int64_t>({E}), boost::test_tools::per_element());
        BOOST_TEST(shape(lp + naming.router) == std::vector<std::int64_t>({E, H}), boost::test_tools::per_element());
        for (std::int64_t e = 0; e < E; ++e) {
            const auto& ep = experts[static_cast<std::size_t>(e)].as_object();
            const char* proj_keys[3] = {"gate", "up", "down"};
            for (int p = 0; p < 3; ++p) {
                const auto& src = ep.at(proj_keys[p]).as_object();
                const std::vector<std::int64_t> matrix = p == 2 ? std::vector<std::int64_t>{H, I} : std::vector<std::int64_t>{I, H};
                BOOST_TEST(shape_of(src.at("shape")) == matrix, boost::test_tools::per_element());
                const std::string tensor(src.at("tensor").as_string());
                if (c.layout == "fused-linear" || c.layout == "fused-bmm" || c.family == "qwen3_vl_moe") {
                    const bool b = c.layout == "fused-bmm" || c.family == "qwen3_vl_moe";
                    BOOST_TEST(tensor == lp + "mlp.experts." + (p == 2 ? "down_proj" : "gate_up_proj"));
                    const auto& slice = src.at("slice").as_object();
                    BOOST_TEST(get(slice, "expert") == e);
                    BOOST_TEST(slice.at("transposed").as_bool() == b);
                    if (p < 2) {
                        BOOST_TEST(get(slice, "offset") == (p == 0 ? 0 : I));  // gate first, then up
                        BOOST_TEST(get(slice, "length") == I);
                        BOOST_TEST(slice.at("along_columns").as_bool() == b);
                    }
                    const auto stored = shape(tensor);
                    const std::vector<std::int64_t> want =
                        p == 2 ? (b ? std::vector<std::int64_t>{E, I, H} : std::vector<std::int64_t>{E, H, I})
                               : (b ? std::vector<std::int64_t>{E, H, 2 * I} : std::vector<std::int64_t>{E, 2 * I, H});
                    BOOST_TEST(stored == want, boost::test_tools::per_element());
                } else if (int4) {  // model-families-2026.md §2.2: int32 [N, K/8], BF16 scales [N, K/32], weight_shape
                    const std::string stem = lp + naming.experts + "." + std::to_string(e) + "." + naming.projections[p];
                    BOOST_TEST(tensor == stem + ".weight");
                    BOOST_TEST(shape(stem + ".weight_packed") == std::vector<std::int64_t>({matrix[0], matrix[1] / 8}),
                               boost::test_tools::per_element());
                    BOOST_TEST(dtype(stem + ".weight_packed") == "I32");
                    BOOST_TEST(shape(stem + ".weight_scale") == std::vector<std::int64_t>({matrix[0], matrix[1] / 32}),
                               boost::test_tools::per_element());
                    BOOST_TEST(dtype(stem + ".weight_scale") == "BF16");
                    BOOST_TEST(role(stem + ".weight_packed") == "routed_expert");
                    BOOST_TEST(role(stem + ".weight_scale") == "routed_expert_scale");
                    BOOST_TEST(role(stem + ".weight_shape") == "routed_expert_scale");
                    continue;
                } else {
                    BOOST_TEST(tensor == lp + naming.experts + "." + std::to_string(e) + "." + naming.projections[p] + ".weight");
                    BOOST_TEST(shape(tensor) == matrix, boost::test_tools::per_element());
                    BOOST_TEST(dtype(tensor) == (fp8 || channel || mx ? "F8_E4M3" : "BF16"));
                    if (mx) {
                        BOOST_TEST(std::string(src.at("encoding").at("tensors").at("scale").as_string()) == tensor + "_scale_inv");
                        BOOST_TEST(dtype(tensor + "_scale_inv") == "U8");
                        BOOST_TEST(shape(tensor + "_scale_inv") == std::vector<std::int64_t>({matrix[0], matrix[1] / 32}),
                                   boost::test_tools::per_element());
                        BOOST_TEST(role(tensor + "_scale_inv") == "routed_expert_scale");
                    }
                    if (channel) {
                        const std::string stem = tensor.substr(0, tensor.size() - std::string(".weight").size());
                        BOOST_TEST(std::string(src.at("encoding").at("tensors").at("scale").as_string()) == tensor + "_scale");
                        BOOST_TEST(std::string(src.at("encoding").at("parameters").at("strategy").as_string()) == "channel");
                        BOOST_TEST(shape(tensor + "_scale") == std::vector<std::int64_t>({matrix[0], 1}), boost::test_tools::per_element());
                        BOOST_TEST(role(tensor + "_scale") == "routed_expert_scale");
                        BOOST_TEST(role(stem + ".input_scale") == "routed_expert_scale");  // ignored, never copied
                    }
                    if (fp8) {
                        BOOST_TEST(std::string(src.at("encoding").at("tensors").at("scale").as_string()) == tensor + "_scale_inv");
                        BOOST_TEST(std::string(src.at("encoding").at("parameters").at("strategy").as_string()) == "block");
                        BOOST_TEST(role(tensor + "_scale_inv") == "routed_expert_scale");
                    }
                }
                BOOST_TEST(role(tensor) == "routed_expert");
            }
        }
    }

    // Dense first layers, shared experts, router bias, MTP, buffers.
    for (std::int64_t l = 0; l < layers; ++l) {
        const std::string lp = naming.layer_prefix + std::to_string(l) + ".";
        const bool moe = std::find(moe_layers.begin(), moe_layers.end(), l) != moe_layers.end();
        if (!moe) BOOST_TEST(role(lp + "mlp.gate_proj.weight") == "dense_mlp");
        if (moe && (deepseek_like(c.family) || c.family == "glm4_moe")) {
            BOOST_TEST(role(lp + "mlp.gate.e_score_correction_bias") == "router_bias");
            BOOST_TEST(dtype(lp + "mlp.gate.e_score_correction_bias") == "F32");
            BOOST_TEST(role(lp + "mlp.shared_experts.down_proj.weight") == "shared_expert");
        }
        if (c.family == "qwen3_next") {
            BOOST_TEST(role(lp + "mlp.shared_expert.gate_proj.weight") == "shared_expert");
            BOOST_TEST(role(lp + "mlp.shared_expert_gate.weight") == "shared_expert_gate");
            BOOST_TEST(shape(lp + "mlp.shared_expert_gate.weight") == std::vector<std::int64_t>({1, H}), boost::test_tools::per_element());
            const bool full = (l + 1) % get(cfg, "full_attention_interval") == 0;
            BOOST_TEST(role(lp + (full ? "self_attn.q_proj.weight" : "linear_attn.in_proj_qkvz.weight")) == "attention");
        }
        if (qwen3_5) {  // the shared expert and its gate; the split linear-attention projections
            BOOST_TEST(role(lp + "mlp.shared_expert.down_proj.weight") == "shared_expert");
            BOOST_TEST(role(lp + "mlp.shared_expert_gate.weight") == "shared_expert_gate");
            const std::string type(cfg.at("layer_types").as_array().at(static_cast<std::size_t>(l)).as_string());
            const std::int64_t nv = get(cfg, "linear_num_value_heads"), key = get(cfg, "linear_num_key_heads") * get(cfg, "linear_key_head_dim"),
                               value = nv * get(cfg, "linear_value_head_dim");
            if (type == "full_attention") {
                BOOST_TEST(shape(lp + "self_attn.q_proj.weight") ==  // query and output gate per head
                               std::vector<std::int64_t>({2 * get(cfg, "num_attention_heads") * get(cfg, "head_dim"), H}),
                           boost::test_tools::per_element());
            } else {
                const std::string a = lp + "linear_attn.";
                BOOST_TEST(shape(a + "in_proj_qkv.weight") == std::vector<std::int64_t>({2 * key + value, H}), boost::test_tools::per_element());
                BOOST_TEST(shape(a + "in_proj_z.weight") == std::vector<std::int64_t>({value, H}), boost::test_tools::per_element());
                for (const char* w : {"in_proj_b.weight", "in_proj_a.weight"}) {
                    BOOST_TEST(shape(a + w) == std::vector<std::int64_t>({nv, H}), boost::test_tools::per_element());
                    BOOST_TEST(role(a + w) == "attention");
                }
                BOOST_TEST(shape(a + "conv1d.weight") == std::vector<std::int64_t>({2 * key + value, 1, get(cfg, "linear_conv_kernel_dim")}),
                           boost::test_tools::per_element());
                BOOST_TEST(role(a + "in_proj_qkv.weight") == "attention");
            }
        }
        if (c.family == "kimi_k2" || c.family == "kimi_k25") BOOST_TEST(role(lp + "self_attn.rotary_emb.inv_freq") == "skipped_buffer");
        // GLM-5.2's "shared" indexer layers reuse an earlier layer's top-k and have no indexer.
        const auto* indexer_types = cfg.if_contains("indexer_types");
        const bool shared_indexer = indexer_types && indexer_types->as_array().at(static_cast<std::size_t>(l)).as_string() == "shared";
        if (shared_indexer)
            for (const auto& [name, r] : roles) BOOST_TEST(name.rfind(lp + "self_attn.indexer.", 0) != 0, name);
        if (sparse_attention(c.family) && !shared_indexer) {  // the indexer (§3.1, §3.4): copied beside attention
            const std::string x = lp + "self_attn.indexer.";
            const std::int64_t heads = get(cfg, "index_n_heads"), dim = get(cfg, "index_head_dim");
            BOOST_TEST(shape(x + "wq_b.weight") == std::vector<std::int64_t>({heads * dim, get(cfg, "q_lora_rank")}),
                       boost::test_tools::per_element());
            BOOST_TEST(shape(x + "wk.weight") == std::vector<std::int64_t>({dim, H}), boost::test_tools::per_element());
            BOOST_TEST(shape(x + "weights_proj.weight") == std::vector<std::int64_t>({heads, H}), boost::test_tools::per_element());
            for (const char* w : {"wq_b.weight", "wk.weight"}) {
                BOOST_TEST(dtype(x + w) == (fp8 ? "F8_E4M3" : "BF16"));
                BOOST_TEST(role(x + w) == "attention");
                if (fp8) BOOST_TEST(role(x + w + "_scale_inv") == "attention");
            }
            BOOST_TEST(dtype(x + "weights_proj.weight") == "BF16");  // never quantized
            BOOST_TEST(role(x + "weights_proj.weight") == "attention");
            BOOST_TEST(role(x + "k_norm.weight") == "norm");
            BOOST_TEST(role(x + "k_norm.bias") == "norm");
            BOOST_TEST(get(cfg, "index_topk") > 0);
        }
        if (m3) {  // per-head q/k norms; the indexer and the shared expert in MoE layers
            BOOST_TEST(shape(lp + "self_attn.q_norm.weight") == std::vector<std::int64_t>({get(cfg, "head_dim")}),
                       boost::test_tools::per_element());
            if (moe) {
                BOOST_TEST(role(lp + "block_sparse_moe.shared_experts.down_proj.weight") == "shared_expert");
                BOOST_TEST(role(lp + "self_attn.index_q_proj.weight") == "attention");
                BOOST_TEST(role(lp + "self_attn.index_k_norm.weight") == "norm");
                BOOST_TEST(dtype(lp + "self_attn.index_k_proj.weight") == (mx ? "F8_E4M3" : "BF16"));
            }
        }
        if (minimax && moe) {  // F32 router and bias
            BOOST_TEST(role(lp + naming.router_bias) == "router_bias");
            BOOST_TEST(dtype(lp + naming.router_bias) == "F32");
            BOOST_TEST(dtype(lp + naming.router) == "F32");
        }
        if (c.family == "minimax_m2") {  // q/k norms over the whole projection
            BOOST_TEST(shape(lp + "self_attn.q_norm.weight") ==
                           std::vector<std::int64_t>({get(cfg, "num_attention_heads") * get(cfg, "head_dim")}),
                       boost::test_tools::per_element());
            BOOST_TEST(shape(lp + "self_attn.k_norm.weight") ==
                           std::vector<std::int64_t>({get(cfg, "num_key_value_heads") * get(cfg, "head_dim")}),
                       boost::test_tools::per_element());
            BOOST_TEST(role(lp + "self_attn.q_norm.weight") == "norm");
        }
    }
    if (channel) {
        const auto& q = config_doc.at("quantization_config");
        BOOST_TEST(q.at("quant_method").as_string() == "compressed-tensors");
        BOOST_TEST(q.at("format").as_string() == "float-quantized");
        BOOST_TEST(q.at("config_groups").at("group_0").at("weights").at("strategy").as_string() == "channel");
    }
    if (c.family == "deepseek_v32" && fp8) {
        BOOST_TEST(config_doc.at("quantization_config").at("scale_fmt").as_string() == "ue8m0");
        // ue8m0: every block scale is a power of two (stored as F32).
        const Checkpoint ckpt = Checkpoint::open(out);
        std::size_t scales = 0;
        for (const auto& name : ckpt.tensor_names()) {
            if (!name.ends_with("_scale_inv")) continue;
            const TensorView v = ckpt.view(name);
            BOOST_REQUIRE((v.dtype == DType::F32));
            for (std::size_t i = 0; i < v.elements(); ++i) {
                float s;
                std::memcpy(&s, v.data() + i * 4, 4);
                int exponent;
                if (std::frexp(s, &exponent) != 0.5f) BOOST_FAIL(name << " holds a scale that is not a power of two: " << s);
            }
            ++scales;
        }
        BOOST_TEST(scales > 0u);
    }
    if (c.family == "glm_moe_dsa") {  // model-families-2026.md §3.4: the keys GLM-5 ships
        for (const char* key : {"index_n_heads", "index_head_dim", "index_topk", "rope_interleave", "indexer_rope_interleave",
                                "mlp_layer_types", "num_nextn_predict_layers", "n_group", "topk_group", "routed_scaling_factor"})
            BOOST_TEST(cfg.contains(key), key);
        BOOST_TEST(config_doc.at("architectures").at(0).as_string() == "GlmMoeDsaForCausalLM");
        BOOST_TEST(cfg.at("rope_interleave").as_bool());
        BOOST_TEST(get(cfg, "num_nextn_predict_layers") == 1);
        std::size_t shared = 0;
        for (const auto& t : cfg.at("indexer_types").as_array()) shared += t.as_string() == "shared";
        BOOST_TEST(shared > 0u);  // GLM-5.2's IndexShare is exercised
        if (fp8) {  // GLM-5-FP8: block 128 without ue8m0; the indexer's score projection not converted
            const auto& q = config_doc.at("quantization_config").as_object();
            BOOST_TEST(!q.contains("scale_fmt"));
            bool indexer_kept = false;
            for (const auto& m : q.at("modules_to_not_convert").as_array())
                indexer_kept = indexer_kept || std::string(m.as_string()).ends_with("self_attn.indexers_proj");
            BOOST_TEST(indexer_kept);
        }
    }
    if (c.family == "kimi_k25") {  // model-families-2026.md §2.2, §3.2: a VLM around Kimi-K2
        BOOST_TEST(config_doc.at("model_type").as_string() == "kimi_k25");
        BOOST_TEST(cfg.at("model_type").as_string() == "kimi_k2");
        BOOST_TEST(!config_doc.contains("quantization_config"));
        BOOST_TEST(cfg.contains("quantization_config") == int4);
        for (const char* t : {"language_model.model.embed_tokens.weight", "language_model.lm_head.weight"})
            BOOST_TEST(role(t) == (std::string(t).ends_with("lm_head.weight") ? "lm_head" : "embedding"));
        BOOST_TEST(role("language_model.model.norm.weight") == "norm");
    }
    if (m3) {  // a VLM whose text_config names minimax_m2; the MXFP8 release's quantization_config on top
        BOOST_TEST(config_doc.at("model_type").as_string() == "minimax_m3_vl");
        BOOST_TEST(cfg.at("model_type").as_string() == "minimax_m2");
        BOOST_TEST(std::string(plan.at("model_type").as_string()) == "minimax_m3_vl");
        BOOST_TEST(std::string(plan.at("family").as_string()) == "minimax_m3");
        BOOST_TEST(config_doc.contains("quantization_config") == mx);
        if (mx) {
            BOOST_TEST(config_doc.at("quantization_config").at("quant_method").as_string() == "mxfp8");
            BOOST_TEST(shape_of(config_doc.at("quantization_config").at("weight_block_size")) == std::vector<std::int64_t>({1, 32}),
                       boost::test_tools::per_element());
        }
        BOOST_TEST(role("language_model.model.embed_tokens.weight") == "embedding");
        BOOST_TEST(role("language_model.lm_head.weight") == "lm_head");
    }
    if (qwen3_5) {  // model-families-2026.md §3.6: a VLM around Qwen3-Next's language model
        BOOST_TEST(config_doc.at("model_type").as_string() == "qwen3_5_moe");
        BOOST_TEST(cfg.at("model_type").as_string() == "qwen3_5_moe_text");
        BOOST_TEST(config_doc.contains("vision_config"));
        for (const char* key : {"norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "rope_theta"})
            BOOST_TEST(!cfg.contains(key), key);
        BOOST_TEST(cfg.at("rope_parameters").at("rope_theta").to_number<double>() > 0);
        BOOST_TEST(static_cast<std::int64_t>(cfg.at("layer_types").as_array().size()) == layers);
        BOOST_TEST(!cfg.contains("quantization_config"));
        BOOST_TEST(config_doc.contains("quantization_config") == fp8);
        BOOST_TEST(role("model.language_model.embed_tokens.weight") == "embedding");
        BOOST_TEST(role("model.language_model.norm.weight") == "norm");
        BOOST_TEST(role("lm_head.weight") == "lm_head");
    }
    std::size_t vision = 0;
    std::size_t mtp = 0;
    for (const auto& [name, r] : roles) {
        const bool deepseek_mtp = name.rfind(naming.layer_prefix + std::to_string(layers) + ".", 0) == 0;
        const bool qwen_mtp = name.rfind("mtp.", 0) == 0 || name.rfind("language_model.model.mtp.", 0) == 0;  // and M3's
        if (deepseek_mtp || qwen_mtp) {
            BOOST_TEST(r == "skipped_mtp", name);
            ++mtp;
        }
        // Vision towers are copied unchanged (role other): a GPU output must still load as the VLM.
        const bool vision_part = name.rfind("vision_tower.", 0) == 0 || name.rfind("mm_projector.", 0) == 0 ||
                                 name.rfind("model.visual.", 0) == 0 || name.rfind("multi_modal_projector.", 0) == 0 ||
                                 name.rfind("patch_merge_mlp.", 0) == 0;
        if (vision_part) {
            BOOST_TEST(r == "other", name);
            ++vision;
        }
        if (!vision_part) BOOST_TEST(r != "other", name);
    }
    BOOST_TEST((vision > 0) == (c.family == "kimi_k25" || c.family == "qwen3_vl_moe" || qwen3_5 || m3));
    const bool has_mtp = c.family == "deepseek_v3" || c.family == "deepseek_v32" || c.family == "glm4_moe" ||
                         c.family == "qwen3_next" || (minimax && get(cfg, "num_mtp_modules") > 0) || qwen3_5 ||
                         c.family == "glm_moe_dsa" || m3;
    BOOST_TEST((mtp > 0) == has_mtp);
    BOOST_TEST(report.at("plan").at("role_counts").as_object().contains("skipped_mtp") == has_mtp);

    // FP8: every FP8 weight has a scale of ceil(shape / 128); some blocks are partial; some scale
    // sits in another shard than its weight.
    if (fp8) {
        bool edge = false, split = false;
        for (const auto& [name, t] : tensors) {
            if (t.at("dtype").as_string() != "F8_E4M3") continue;
            auto w = shape(name), s = shape(name + "_scale_inv");
            BOOST_TEST(s == std::vector<std::int64_t>({(w[0] + 127) / 128, (w[1] + 127) / 128}), boost::test_tools::per_element());
            edge = edge || w[0] % 128 != 0 || w[1] % 128 != 0;
            split = split || tensors.at(name).at("shard") != tensors.at(name + "_scale_inv").at("shard");
        }
        BOOST_TEST(edge);
        BOOST_TEST((split || shards.size() == 1));  // a single-file checkpoint cannot split a pair
        BOOST_TEST(shape_of(config_doc.at("quantization_config").at("weight_block_size")) ==
                   std::vector<std::int64_t>({128, 128}), boost::test_tools::per_element());
    }

    // Sizes meet the AMX rules with 2 threadpool parts (kt-cpu-format.md §4.2, §5) and the GPU
    // kernels' (gptq-compressed-tensors.md §8: group 128, N % 64, K % 128).
    BOOST_TEST(I % 2 == 0);
    BOOST_TEST((I / 2) % 128 == 0);
    BOOST_TEST(H % 128 == 0);
    BOOST_TEST(I % 128 == 0);
}

const std::vector<Case> cases = {
    {"deepseek_v3", "fp8", "per-expert", R"(model-\d{5}-of-\d{6}\.safetensors)"},
    {"deepseek_v3", "bf16", "per-expert", R"(model-\d{5}-of-\d{6}\.safetensors)"},
    {"kimi_k2", "fp8", "per-expert", R"(model-[1-9]\d*-of-[1-9]\d*\.safetensors)"},
    {"kimi_k2", "int4-ct", "per-expert", R"(model-[1-9]\d*-of-[1-9]\d*\.safetensors)"},
    {"deepseek_v32", "bf16", "per-expert", R"(model-\d{5}-of-\d{6}\.safetensors)"},
    {"deepseek_v32", "fp8", "per-expert", R"(model-\d{5}-of-\d{6}\.safetensors)"},
    {"kimi_k25", "bf16", "per-expert", R"(model-[1-9]\d*-of-[1-9]\d*\.safetensors)"},
    {"kimi_k25", "int4-ct", "per-expert", R"(model-[1-9]\d*-of-[1-9]\d*\.safetensors)"},
    {"kimi_k25", "int4-ct", "per-expert", R"(model-\d{5}-of-\d{6}\.safetensors)", "kimi_k26"},
    {"qwen3_next", "bf16", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"qwen3_next", "fp8", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"mixtral", "bf16", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"mixtral", "bf16", "fused-linear", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"mixtral", "fp8", "mistral-native", R"(consolidated\.safetensors)"},
    {"qwen3_moe", "bf16", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"qwen3_moe", "bf16", "fused-bmm", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"qwen3_vl_moe", "bf16", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"glm4_moe", "bf16", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"glm4_moe", "fp8", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"glm4_moe", "fp8-channel", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"minimax_m2", "bf16", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"minimax_m2", "fp8", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"minimax_m2", "fp8", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)", "minimax_m27"},
    {"minimax_m3", "bf16", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"minimax_m3", "mxfp8", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"qwen3_5_moe", "bf16", "fused-linear", R"(model\.safetensors-\d{5}-of-\d{5}\.safetensors)"},
    {"qwen3_5_moe", "fp8", "per-expert", R"(model\.safetensors-\d{5}-of-\d{5}\.safetensors)"},
    {"glm_moe_dsa", "bf16", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
    {"glm_moe_dsa", "fp8", "per-expert", R"(model-\d{5}-of-\d{5}\.safetensors)"},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(families)

BOOST_AUTO_TEST_CASE(synth_then_inspect_reports_each_familys_plan) {
    for (const auto& c : cases)
        BOOST_TEST_CONTEXT(c.family << " " << c.release << " " << c.dtype << " " << c.layout) { check_family(c); }
}

BOOST_AUTO_TEST_CASE(synth_is_deterministic_per_seed) {
    TempDir dir;
    // "nested/second": synth makes the folders above its output, as convert does.
    const std::pair<const char*, const char*> runs[] = {{"7", "first"}, {"7", "nested/second"}, {"8", "other"}};
    for (auto [seed, name] : runs) {
        auto r = run_moequant({"synth", "--family", "glm4_moe", "--dtype", "fp8", "--seed", seed, "--out", (dir / name).string()});
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    }
    auto files = [&](const fs::path& d) {
        std::map<std::string, std::string> out;
        for (const auto& e : fs::directory_iterator(d)) out[e.path().filename().string()] = sha256_file(e.path());
        return out;
    };
    BOOST_TEST((files(dir / "first") == files(dir / "nested" / "second")));
    BOOST_TEST((files(dir / "first") != files(dir / "other")));
}

BOOST_AUTO_TEST_CASE(small_preset_is_larger_and_still_consistent) {
    TempDir dir;
    auto r = run_moequant({"synth", "--family", "deepseek_v3", "--preset", "small", "--dtype", "fp8", "--out", (dir / "s").string()});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto inspected = run_moequant({"inspect", "--json", (dir / "s").string()});
    BOOST_REQUIRE_MESSAGE(inspected.exit_code == 0, inspected.err);
    auto plan = json::parse(inspected.out).at("plan").as_object();
    BOOST_TEST(plan.at("num_experts").to_number<int>() == 16);
    BOOST_TEST(plan.at("moe_layers").as_array().size() == 4u);  // 6 layers, 2 dense
}

BOOST_AUTO_TEST_CASE(synth_refuses_bad_options_and_existing_output) {
    TempDir dir;
    auto unknown = run_moequant({"synth", "--family", "llama", "--out", (dir / "x").string()});
    BOOST_TEST(unknown.exit_code == 2);
    BOOST_TEST(unknown.err.find("installed") != std::string::npos);
    BOOST_TEST(unknown.err.find("minimax_m27 (minimax_m2)") != std::string::npos, unknown.err);  // releases listed too
    auto preset = run_moequant({"synth", "--family", "mixtral", "--preset", "huge", "--out", (dir / "x").string()});
    BOOST_TEST(preset.exit_code == 2);
    BOOST_TEST(preset.err.find("tiny, small") != std::string::npos);
    auto layout = run_moequant({"synth", "--family", "deepseek_v3", "--layout", "fused-bmm", "--out", (dir / "x").string()});
    BOOST_TEST(layout.exit_code == 2);
    BOOST_TEST(!fs::exists(dir / "x"));
    BOOST_TEST(!fs::exists(dir / ".x.moequant.partial"));
    BOOST_REQUIRE(run_moequant({"synth", "--family", "mixtral", "--out", (dir / "x").string()}).exit_code == 0);
    auto again = run_moequant({"synth", "--family", "mixtral", "--out", (dir / "x").string()});
    BOOST_TEST(again.exit_code == 5);
    BOOST_TEST(again.err.find("--overwrite") != std::string::npos);
    BOOST_TEST(run_moequant({"synth", "--family", "mixtral", "--overwrite", "--out", (dir / "x").string()}).exit_code == 0);
}

// A plugin caller (not synth, which passes a release's own model_type) asking an adapter for a
// release it does not write, or for one under another model_type, gets a usage error naming both.
BOOST_AUTO_TEST_CASE(synthesize_refuses_a_release_it_does_not_write) {
    Registry registry;
    for (const char* plugin : {"deepseek_v3", "mixtral"})
        registry.load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / ("moequant-adapter-" + std::string(plugin) + ".so"),
                           PluginOrigin::explicit_file);
    const ModelAdapter* deepseek = registry.adapter("deepseek_v3");
    const ModelAdapter* mixtral = registry.adapter("mixtral");
    BOOST_REQUIRE(deepseek && mixtral);
    TempDir dir;
    auto refusal = [&](const ModelAdapter& adapter, Options options) {
        return std::string(error_of([&] { adapter.synthesize(dir.path(), options); }, ErrorKind::usage).what());
    };
    const std::string other_type = refusal(*deepseek, {{"release", "kimi_k26"}, {"model_type", "kimi_k2"}});
    BOOST_TEST(other_type.find("release 'kimi_k26' has model_type 'kimi_k25', not 'kimi_k2'") != std::string::npos, other_type);
    const std::string unknown = refusal(*deepseek, {{"release", "minimax_m27"}});
    BOOST_TEST(unknown.find("release 'minimax_m27' is not one of: kimi_k26") != std::string::npos, unknown);
    const std::string none = refusal(*mixtral, {{"release", "kimi_k26"}});
    BOOST_TEST(none.find("synthesizes no named release") != std::string::npos, none);
    BOOST_TEST(fs::is_empty(dir.path()));  // refused before any file
}

BOOST_AUTO_TEST_SUITE_END()
