// The MXFP4 families of issue 16, DeepSeek-V4-Flash and gpt-oss: synth in each family's
// conventions, the plan checked tensor by tensor against model-families-2026.md §3.7/§3.8
// (expectations recomputed from the written config.json), what each can be converted into,
// and the refusals (gpt-oss into kt's AMX formats, calibration forwards of both).

#include "reference_numerics.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <tuple>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

using Shape64 = std::vector<std::int64_t>;

std::int64_t get(const json::object& o, const char* key) { return o.at(key).to_number<std::int64_t>(); }

Shape64 shape_of(const json::value& v) {
    Shape64 s;
    for (const auto& d : v.as_array()) s.push_back(d.to_number<std::int64_t>());
    return s;
}

void run_ok(const std::vector<std::string>& args) {
    auto r = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, args[0] << " failed (" << r.exit_code << "): " << r.err);
}

// synth + inspect --json --plan --tensors: the report, the config, every tensor and its role.
struct Inspected {
    json::object report, plan, config;
    std::map<std::string, json::object> tensors;
    std::map<std::string, std::string> roles;
    std::string role(const std::string& name) const { return roles.count(name) ? roles.at(name) : "(absent)"; }
    Shape64 shape(const std::string& name) const {
        BOOST_REQUIRE_MESSAGE(tensors.count(name), "missing tensor " << name);
        return shape_of(tensors.at(name).at("shape"));
    }
    std::string dtype(const std::string& name) const { return std::string(tensors.at(name).at("dtype").as_string()); }
    bool warns(const std::string& text) const {
        for (const auto& w : plan.at("warnings").as_array())
            if (std::string(w.as_string()).find(text) != std::string::npos) return true;
        return false;
    }
};

Inspected inspect(const fs::path& ckpt) {
    auto r = run_moequant({"inspect", "--json", "--plan", "--tensors", ckpt.string()});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Inspected i;
    i.report = json::parse(r.out).as_object();
    i.plan = i.report.at("plan").as_object();
    i.config = json::parse(read_text(ckpt / "config.json")).as_object();
    for (const auto& t : i.report.at("tensor_list").as_array()) i.tensors[std::string(t.at("name").as_string())] = t.as_object();
    for (const auto& kv : i.plan.at("tensor_roles").as_object()) i.roles[std::string(kv.key())] = std::string(kv.value().as_string());
    BOOST_TEST(i.roles.size() == i.tensors.size());
    return i;
}

// `family` synthesized with MXFP4 experts into `ckpt`, then inspected.
Inspected synth_mxfp4(const std::string& family, const fs::path& ckpt) {
    run_ok({"synth", "--family", family, "--dtype", "mxfp4", "--out", ckpt.string()});
    return inspect(ckpt);
}

// The plan's expert counts are the config's.
void check_expert_counts(const Inspected& i, std::int64_t experts, std::int64_t intermediate, std::int64_t top_k) {
    BOOST_TEST(get(i.plan, "num_experts") == experts);
    BOOST_TEST(get(i.plan, "expert_intermediate_size") == intermediate);
    BOOST_TEST(get(i.plan, "experts_per_token") == top_k);
}

std::vector<std::string> shard_names(const fs::path& ckpt) {
    std::set<std::string> out;
    const json::value index = json::parse(read_text(ckpt / "model.safetensors.index.json"));
    for (const auto& kv : index.at("weight_map").as_object())
        out.insert(std::string(kv.value().as_string()));
    return {out.begin(), out.end()};
}

bool one_line(const std::string& err) { return std::count(err.begin(), err.end(), '\n') == 1; }

}  // namespace

BOOST_AUTO_TEST_SUITE(families)

BOOST_AUTO_TEST_CASE(deepseek_v4_plan_follows_its_names_and_config) {
    TempDir dir;
    const fs::path ckpt = dir / "v4";
    const Inspected i = synth_mxfp4("deepseek_v4", ckpt);
    const auto& cfg = i.config;
    const std::int64_t H = get(cfg, "hidden_size"), I = get(cfg, "moe_intermediate_size"), E = get(cfg, "n_routed_experts"),
                       L = get(cfg, "num_hidden_layers"), hash = get(cfg, "num_hash_layers");
    BOOST_TEST(std::string(cfg.at("expert_dtype").as_string()) == "fp4");
    BOOST_TEST(std::string(i.plan.at("family").as_string()) == "deepseek_v4");
    check_expert_counts(i, E, I, get(cfg, "num_experts_per_tok"));
    BOOST_TEST(std::string(i.plan.at("layout").as_string()) == "per-expert");
    for (const auto& s : shard_names(ckpt)) BOOST_TEST(std::regex_match(s, std::regex(R"(model-\d{5}-of-\d{5}\.safetensors)")), s);
    Shape64 all_layers;
    for (std::int64_t l = 0; l < L; ++l) all_layers.push_back(l);
    BOOST_TEST(shape_of(i.plan.at("moe_layers")) == all_layers, boost::test_tools::per_element());  // hash layers too
    BOOST_TEST(get(i.plan.at("router").as_object(), "top_k") == get(cfg, "num_experts_per_tok"));
    BOOST_TEST(i.plan.at("router").at("scaling").to_number<double>() == cfg.at("routed_scaling_factor").to_number<double>());
    BOOST_TEST(i.warns("swiglu_limit"));
    BOOST_TEST(i.warns("routed-only calibration is refused"));

    const auto& layers = i.plan.at("layers").as_array();
    BOOST_REQUIRE(static_cast<std::int64_t>(layers.size()) == L);
    const char* keys[3] = {"gate", "up", "down"};
    const char* names[3] = {"w1", "w3", "w2"};
    for (std::int64_t l = 0; l < L; ++l) {
        const auto& layer = layers[static_cast<std::size_t>(l)].as_object();
        const std::string lp = "layers." + std::to_string(l) + ".";
        BOOST_TEST(std::string(layer.at("router_weight").as_string()).empty());  // the router is not modelled
        BOOST_TEST(i.role(lp + "ffn.gate.weight") == "router");
        if (l < hash) {
            BOOST_TEST(i.role(lp + "ffn.gate.tid2eid") == "router");
            BOOST_TEST(i.dtype(lp + "ffn.gate.tid2eid") == "I64");
            BOOST_TEST(i.role(lp + "ffn.gate.bias") == "(absent)");
        } else {
            BOOST_TEST(i.role(lp + "ffn.gate.bias") == "router_bias");
        }
        for (const char* s : {"w1", "w2", "w3"}) BOOST_TEST(i.role(lp + "ffn.shared_experts." + s + ".weight") == "shared_expert");
        for (const char* a : {"attn.wq_a.weight", "attn.wq_b.weight", "attn.wkv.weight", "attn.wo_a.weight", "attn.wo_b.weight",
                              "attn.attn_sink"})
            BOOST_TEST(i.role(lp + a) == "attention", a);
        for (const char* n : {"attn_norm.weight", "ffn_norm.weight", "attn.q_norm.weight", "attn.kv_norm.weight"})
            BOOST_TEST(i.role(lp + n) == "norm", n);
        BOOST_TEST(i.role(lp + "hc_attn_fn") == "other");  // hyper-connections: unnamed by the spec, warned
        const auto& experts = layer.at("experts").as_array();
        BOOST_REQUIRE(static_cast<std::int64_t>(experts.size()) == E);
        for (std::int64_t e = 0; e < E; ++e)
            for (int p = 0; p < 3; ++p) {
                const auto& src = experts[static_cast<std::size_t>(e)].at(keys[p]).as_object();
                const std::string stem = lp + "ffn.experts." + std::to_string(e) + "." + names[p];
                const Shape64 matrix = p == 2 ? Shape64{H, I} : Shape64{I, H};
                BOOST_TEST(std::string(src.at("tensor").as_string()) == stem + ".weight");
                BOOST_TEST(shape_of(src.at("shape")) == matrix, boost::test_tools::per_element());
                BOOST_TEST(std::string(src.at("encoding").at("id").as_string()) == "mxfp4");
                BOOST_TEST(!src.contains("slice"));
                BOOST_TEST(i.role(stem + ".weight") == "routed_expert");
                BOOST_TEST(i.role(stem + ".scale") == "routed_expert_scale");
                BOOST_TEST(i.dtype(stem + ".weight") == "I8");
                BOOST_TEST(i.dtype(stem + ".scale") == "F8_E8M0");
                BOOST_TEST(i.shape(stem + ".weight") == (Shape64{matrix[0], matrix[1] / 2}), boost::test_tools::per_element());
                BOOST_TEST(i.shape(stem + ".scale") == (Shape64{matrix[0], matrix[1] / 32}), boost::test_tools::per_element());
            }
    }
    BOOST_TEST(i.role("embed.weight") == "embedding");
    BOOST_TEST(i.role("head.weight") == "lm_head");
    BOOST_TEST(i.role("norm.weight") == "norm");
    std::size_t mtp = 0;
    for (const auto& [name, r] : i.roles)
        if (name.rfind("mtp.", 0) == 0) {
            BOOST_TEST(r == "skipped_mtp", name);
            ++mtp;
        } else if (r == "other") {
            BOOST_TEST(name.find("hc_") != std::string::npos, name);  // only the hyper-connections are unknown
        }
    BOOST_TEST(mtp > 0u);
    BOOST_TEST(i.warns("no known role"));
}

// DeepSeek-V4-Flash's inventory as the release has it (and llama.cpp's deepseek4 loader asks
// for it): the head's hyper-connection [hc, hc·H] / [hc] / [1], the KV compressor on every
// ratio-4 and ratio-128 layer, the lightning indexer on ratio-4 layers, and the non-expert
// linears block FP8 with F8_E8M0 `.scale`s next to the MXFP4 experts; BF16 with --dtype bf16.
BOOST_AUTO_TEST_CASE(deepseek_v4_synth_has_the_release_inventory) {
    TempDir dir;
    for (const char* dtype : {"mxfp4", "bf16"}) {
        BOOST_TEST_CONTEXT(dtype) {
            const fs::path ckpt = dir / dtype;
            run_ok({"synth", "--family", "deepseek_v4", "--dtype", dtype, "--out", ckpt.string()});
            const Inspected i = inspect(ckpt);
            const bool release = std::string(dtype) == "mxfp4";
            const auto& cfg = i.config;
            const std::int64_t H = get(cfg, "hidden_size"), L = get(cfg, "num_hidden_layers"), hc = get(cfg, "hc_mult"),
                               D = get(cfg, "head_dim"), nh = get(cfg, "num_attention_heads"), Q = get(cfg, "q_lora_rank"),
                               G = get(cfg, "o_groups"), R = get(cfg, "o_lora_rank"), I = get(cfg, "moe_intermediate_size"),
                               ih = get(cfg, "index_n_heads"), id = get(cfg, "index_head_dim");
            // llama.cpp's deepseek4 constraints (hc 4, heads divisible by o_groups, an index head of 64 or 128).
            BOOST_TEST(hc == 4);
            BOOST_TEST(nh % G == 0);
            BOOST_TEST((id == 64 || id == 128));
            BOOST_TEST(D != id);
            BOOST_TEST(cfg.at("swiglu_limit").is_double());
            BOOST_TEST(get(cfg.at("rope_scaling").as_object(), "beta_fast") == 32);
            BOOST_TEST(get(cfg.at("rope_scaling").as_object(), "beta_slow") == 1);
            if (release) {
                const auto& q = cfg.at("quantization_config").as_object();
                BOOST_TEST(std::string(q.at("quant_method").as_string()) == "fp8");
                BOOST_TEST(std::string(q.at("fmt").as_string()) == "e4m3");
                BOOST_TEST(std::string(q.at("scale_fmt").as_string()) == "ue8m0");
                BOOST_TEST(std::string(q.at("activation_scheme").as_string()) == "dynamic");
                BOOST_TEST(shape_of(q.at("weight_block_size")) == (Shape64{128, 128}), boost::test_tools::per_element());
                BOOST_TEST(std::string(cfg.at("expert_dtype").as_string()) == "fp4");
            } else {
                BOOST_TEST(!cfg.contains("quantization_config"));
            }

            auto expect = [&](const std::string& name, const char* dtype_name, const Shape64& shape, const char* role) {
                BOOST_TEST_CONTEXT(name) {
                    BOOST_TEST(i.shape(name) == shape, boost::test_tools::per_element());
                    BOOST_TEST(i.dtype(name) == dtype_name);
                    BOOST_TEST(i.role(name) == role);
                }
            };
            // A non-expert linear: block FP8 + [ceil(rows/128), ceil(cols/128)] E8M0 `.scale` in the release.
            auto linear = [&](const std::string& stem, std::int64_t rows, std::int64_t cols, const char* role) {
                if (!release) {
                    expect(stem + ".weight", "BF16", {rows, cols}, role);
                    BOOST_TEST(i.role(stem + ".scale") == "(absent)", stem);
                    return;
                }
                expect(stem + ".weight", "F8_E4M3", {rows, cols}, role);
                expect(stem + ".scale", "F8_E8M0", {(rows + 127) / 128, (cols + 127) / 128}, role);
            };
            expect("hc_head_fn", "F32", {hc, hc * H}, "other");
            expect("hc_head_base", "F32", {hc}, "other");
            expect("hc_head_scale", "F32", {1}, "other");

            const auto& ratios = cfg.at("compress_ratios").as_array();
            BOOST_REQUIRE(static_cast<std::int64_t>(ratios.size()) == L + 1);
            std::set<std::int64_t> seen;
            for (std::int64_t l = 0; l < L; ++l) {
                const std::string lp = "layers." + std::to_string(l) + ".", a = lp + "attn.";
                const std::int64_t r = ratios[static_cast<std::size_t>(l)].to_number<std::int64_t>();
                BOOST_TEST((r == 0 || r == 4 || r == 128), r);
                seen.insert(r);
                linear(a + "wq_a", Q, H, "attention");
                linear(a + "wq_b", nh * D, Q, "attention");
                linear(a + "wkv", D, H, "attention");
                linear(a + "wo_a", G * R, nh * D / G, "attention");
                linear(a + "wo_b", H, G * R, "attention");
                linear(lp + "ffn.shared_experts.w1", I, H, "shared_expert");
                linear(lp + "ffn.shared_experts.w3", I, H, "shared_expert");
                linear(lp + "ffn.shared_experts.w2", H, I, "shared_expert");
                expect(a + "attn_sink", "F32", {nh}, "attention");
                expect(lp + "ffn.gate.weight", "BF16", {get(cfg, "n_routed_experts"), H}, "router");
                expect(lp + "hc_attn_fn", "F32", {(2 + hc) * hc, hc * H}, "other");
                expect(lp + "hc_ffn_scale", "F32", {3}, "other");
                if (r != 0) {
                    const std::int64_t width = (r == 4 ? 2 : 1) * D;
                    expect(a + "compressor.ape", "F32", {r, width}, "attention");
                    expect(a + "compressor.wkv.weight", "BF16", {width, H}, "attention");
                    expect(a + "compressor.wgate.weight", "BF16", {width, H}, "attention");
                    expect(a + "compressor.norm.weight", "BF16", {D}, "norm");
                } else {
                    BOOST_TEST(i.role(a + "compressor.ape") == "(absent)", lp);
                }
                if (r == 4) {
                    linear(a + "indexer.wq_b", ih * id, Q, "attention");
                    expect(a + "indexer.weights_proj.weight", "BF16", {ih, H}, "attention");
                    expect(a + "indexer.compressor.ape", "F32", {4, 2 * id}, "attention");
                    expect(a + "indexer.compressor.wkv.weight", "BF16", {2 * id, H}, "attention");
                    expect(a + "indexer.compressor.wgate.weight", "BF16", {2 * id, H}, "attention");
                    expect(a + "indexer.compressor.norm.weight", "BF16", {id}, "norm");
                } else {
                    BOOST_TEST(i.role(a + "indexer.weights_proj.weight") == "(absent)", lp);
                }
            }
            BOOST_TEST((seen == std::set<std::int64_t>{0, 4, 128}));  // the tiny model has every kind of layer
            // Exactly the release's tensors: nothing under attn. beyond the names above.
            for (const auto& [name, r] : i.roles)
                if (name.find(".attn.") != std::string::npos) {
                    static const std::regex known(
                        R"(layers\.\d+\.attn\.(wq_a|wq_b|wkv|wo_a|wo_b|indexer\.wq_b)\.(weight|scale)|)"
                        R"(layers\.\d+\.attn\.(q_norm|kv_norm|indexer\.weights_proj)\.weight|layers\.\d+\.attn\.attn_sink|)"
                        R"(layers\.\d+\.attn\.(indexer\.)?compressor\.(ape|wkv\.weight|wgate\.weight|norm\.weight))");
                    BOOST_TEST(std::regex_match(name, known), name);
                }
        }
    }
}

BOOST_AUTO_TEST_CASE(gpt_oss_plan_slices_interleaved_gate_up_with_step_2) {
    TempDir dir;
    const fs::path ckpt = dir / "oss";
    const Inspected i = synth_mxfp4("gpt_oss", ckpt);
    const auto& cfg = i.config;
    const std::int64_t H = get(cfg, "hidden_size"), I = get(cfg, "intermediate_size"), E = get(cfg, "num_local_experts"),
                       L = get(cfg, "num_hidden_layers");
    BOOST_TEST(std::string(cfg.at("quantization_config").at("quant_method").as_string()) == "mxfp4");
    check_expert_counts(i, E, I, get(cfg, "experts_per_token"));
    BOOST_TEST(std::string(i.plan.at("layout").as_string()) == "fused-linear");
    BOOST_TEST(std::string(i.plan.at("router").at("scoring").as_string()) == "softmax");
    BOOST_TEST(i.plan.at("router").at("normalize").as_bool());
    BOOST_TEST(i.warns("kt-safetensors and kt-tree refuse"));
    BOOST_TEST((shard_names(ckpt) == std::vector<std::string>{"model-00000-of-00002.safetensors", "model-00001-of-00002.safetensors",
                                                             "model-00002-of-00002.safetensors"}));
    const auto& layers = i.plan.at("layers").as_array();
    BOOST_REQUIRE(static_cast<std::int64_t>(layers.size()) == L);
    const char* keys[3] = {"gate", "up", "down"};
    for (std::int64_t l = 0; l < L; ++l) {
        const std::string lp = "model.layers." + std::to_string(l) + ".", x = lp + "mlp.experts.";
        const auto& layer = layers[static_cast<std::size_t>(l)].as_object();
        BOOST_TEST(std::string(layer.at("router_weight").as_string()).empty());
        BOOST_TEST(i.role(lp + "mlp.router.weight") == "router");
        BOOST_TEST(i.role(lp + "mlp.router.bias") == "router");
        for (const char* a : {"q_proj.weight", "q_proj.bias", "k_proj.bias", "v_proj.weight", "o_proj.weight", "o_proj.bias", "sinks"})
            BOOST_TEST(i.role(lp + "self_attn." + a) == "attention", a);
        BOOST_TEST(i.role(lp + "input_layernorm.weight") == "norm");
        BOOST_TEST(i.role(lp + "post_attention_layernorm.weight") == "norm");
        BOOST_TEST(i.role(x + "gate_up_proj_blocks") == "routed_expert");
        BOOST_TEST(i.role(x + "gate_up_proj_scales") == "routed_expert_scale");
        BOOST_TEST(i.role(x + "down_proj_blocks") == "routed_expert");
        BOOST_TEST(i.role(x + "down_proj_scales") == "routed_expert_scale");
        BOOST_TEST(i.role(x + "gate_up_proj_bias") == "routed_expert");  // a parameter of the experts
        BOOST_TEST(i.role(x + "down_proj_bias") == "routed_expert");
        BOOST_TEST(i.shape(x + "gate_up_proj_blocks") == (Shape64{E, 2 * I, H / 32, 16}), boost::test_tools::per_element());
        BOOST_TEST(i.shape(x + "gate_up_proj_scales") == (Shape64{E, 2 * I, H / 32}), boost::test_tools::per_element());
        BOOST_TEST(i.shape(x + "down_proj_blocks") == (Shape64{E, H, I / 32, 16}), boost::test_tools::per_element());
        BOOST_TEST(i.shape(x + "gate_up_proj_bias") == (Shape64{E, 2 * I}), boost::test_tools::per_element());
        BOOST_TEST(i.shape(x + "down_proj_bias") == (Shape64{E, H}), boost::test_tools::per_element());
        BOOST_TEST(i.dtype(x + "gate_up_proj_blocks") == "U8");
        BOOST_TEST(i.dtype(x + "gate_up_proj_scales") == "U8");
        BOOST_TEST(i.dtype(x + "gate_up_proj_bias") == "BF16");
        const auto& experts = layer.at("experts").as_array();
        BOOST_REQUIRE(static_cast<std::int64_t>(experts.size()) == E);
        for (std::int64_t e = 0; e < E; ++e)
            for (int p = 0; p < 3; ++p) {
                const auto& src = experts[static_cast<std::size_t>(e)].at(keys[p]).as_object();
                BOOST_TEST(std::string(src.at("tensor").as_string()) == x + (p == 2 ? "down_proj" : "gate_up_proj"));
                BOOST_TEST(shape_of(src.at("shape")) == (p == 2 ? Shape64{H, I} : Shape64{I, H}), boost::test_tools::per_element());
                BOOST_TEST(std::string(src.at("encoding").at("id").as_string()) == "mxfp4");
                const auto& slice = src.at("slice").as_object();
                BOOST_TEST(get(slice, "expert") == e);
                BOOST_TEST(get(slice, "offset") == (p == 1 ? 1 : 0));  // row 2j gate j, row 2j + 1 up j
                BOOST_TEST(get(slice, "length") == (p == 2 ? H : I));
                BOOST_TEST(get(slice, "step") == (p == 2 ? 1 : 2));
                BOOST_TEST(!slice.at("along_columns").as_bool());
                BOOST_TEST(!slice.at("transposed").as_bool());
            }
    }
    BOOST_TEST(i.role("model.embed_tokens.weight") == "embedding");
    BOOST_TEST(i.role("lm_head.weight") == "lm_head");
    BOOST_TEST(i.role("model.norm.weight") == "norm");
    for (const auto& [name, r] : i.roles) BOOST_TEST(r != "other", name);
}

BOOST_AUTO_TEST_CASE(gpt_oss_original_and_metal_copies_are_not_read) {
    TempDir dir;
    const fs::path ckpt = dir / "oss";
    run_ok({"synth", "--family", "gpt_oss", "--dtype", "mxfp4", "--out", ckpt.string()});
    auto before = run_moequant({"inspect", "--json", "--plan", "--tensors", ckpt.string()});
    BOOST_REQUIRE(before.exit_code == 0);
    // The release's second copy (block.L.* names) and the Metal build, as decoys.
    fs::create_directories(ckpt / "original");
    fs::create_directories(ckpt / "metal");
    fs::copy_file(ckpt / "model-00001-of-00002.safetensors", ckpt / "original" / "model.safetensors");
    write_text(ckpt / "original" / "config.json", R"({"num_hidden_layers": 99})");
    write_text(ckpt / "metal" / "model.bin", "not a checkpoint");
    auto after = run_moequant({"inspect", "--json", "--plan", "--tensors", ckpt.string()});
    BOOST_REQUIRE_MESSAGE(after.exit_code == 0, after.err);
    BOOST_TEST((json::parse(after.out).at("plan") == json::parse(before.out).at("plan")));
}

BOOST_AUTO_TEST_CASE(mxfp4_families_synth_only_their_encodings) {
    TempDir dir;
    auto oss = run_moequant({"synth", "--family", "gpt_oss", "--out", (dir / "a").string()});  // default --dtype bf16
    BOOST_TEST(oss.exit_code == 2);
    BOOST_TEST(oss.err.find("--dtype mxfp4") != std::string::npos, oss.err);
    auto v4 = run_moequant({"synth", "--family", "deepseek_v4", "--dtype", "fp8", "--out", (dir / "b").string()});
    BOOST_TEST(v4.exit_code == 2);
    run_ok({"synth", "--family", "deepseek_v4", "--out", (dir / "c").string()});  // BF16 experts plan the same way
    const Inspected i = inspect(dir / "c");
    BOOST_TEST(std::string(i.plan.at("expert_weights").at("gate").at("encoding").at("id").as_string()) == "float");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(convert)

BOOST_AUTO_TEST_CASE(deepseek_v4_converts_to_amx_with_the_clamp_warning_and_verifies) {
    TempDir dir;
    const fs::path ckpt = dir / "v4";
    run_ok({"synth", "--family", "deepseek_v4", "--dtype", "mxfp4", "--out", ckpt.string()});
    for (const char* method : {"int4", "int8"}) {
        const fs::path out = dir / ("kt-" + std::string(method));
        auto c = run_moequant({"convert", "-i", ckpt.string(), "-o", out.string(), "--quant-method", method, "--quiet"});
        BOOST_REQUIRE_MESSAGE(c.exit_code == 0, c.err);
        BOOST_TEST(c.err.find("warning: kt-kernel's AMX INT4/INT8 methods do not apply DeepSeek-V4's swiglu_limit clamp") !=
                       std::string::npos,
                   c.err);
        auto v = run_moequant({"verify", "--source", ckpt.string(), "--converted", out.string()});
        BOOST_TEST(v.exit_code == 0, v.out << v.err);
        BOOST_TEST(v.out.find("PASSED") != std::string::npos, v.out);
    }
    // Layer tensors keep their bytes under kt's V4 names (`layers.L.` -> `blk.L.`), block-FP8
    // weights with their E8M0 `.scale`s; MTP is not copied.
    {
        Checkpoint source = Checkpoint::open(ckpt), kt = Checkpoint::open(dir / "kt-int4");
        for (const char* name : {"layers.0.attn.wq_a.weight", "layers.0.attn.wq_a.scale", "layers.3.ffn.gate.bias",
                                 "layers.1.ffn.shared_experts.w2.weight", "layers.1.ffn.shared_experts.w2.scale",
                                 "layers.2.attn.indexer.wq_b.scale", "layers.3.attn.compressor.ape"}) {
            const std::string renamed = "blk." + std::string(name).substr(7);
            BOOST_REQUIRE_MESSAGE(kt.contains(renamed), renamed);
            const TensorView a = source.view(name), b = kt.view(renamed);
            BOOST_TEST((a.size_bytes() == b.size_bytes() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0), renamed);
        }
        for (const auto& name : kt.tensor_names()) {
            BOOST_TEST(!name.starts_with("layers."), name);
            BOOST_TEST(!name.starts_with("mtp."), name);
        }
    }
    // No calibration forward: GPTQ with a dataset is refused with the reason; RTN needs none.
    auto g = run_moequant({"gptq", "--model_id", ckpt.string(), "--output_dir", (dir / "g").string(), "--dataset", "embedded", "--quiet"});
    BOOST_TEST(g.exit_code == 4, g.err);
    BOOST_TEST(g.err.find("family 'deepseek_v4' has no calibration forward pass") != std::string::npos, g.err);
    BOOST_TEST(g.err.find("--quant_method RTN") != std::string::npos, g.err);
    BOOST_TEST(one_line(g.err), g.err);
    BOOST_TEST(!fs::exists(dir / "g" / "model.safetensors.index.json"));
    run_ok({"gptq", "--model_id", ckpt.string(), "--output_dir", (dir / "rtn").string(), "--quant_method", "RTN", "--quiet"});
    // Recorded activations: GPTQ over all tokens needs no router; routed-only would need the
    // router the plan does not model, and is refused naming that.
    const fs::path acts = dir / "act.safetensors", with = dir / "v4-act";
    run_ok({"synth", "--family", "deepseek_v4", "--dtype", "mxfp4", "--out", with.string(), "--activations", acts.string(),
            "--samples", "4", "--sample-tokens", "32"});
    run_ok({"gptq", "--model_id", with.string(), "--output_dir", (dir / "gptq-act").string(), "--calibration-activations",
            acts.string(), "--quiet"});
    auto routed = run_moequant({"gptq", "--model_id", with.string(), "--output_dir", (dir / "routed").string(),
                                "--calibration-activations", acts.string(), "--routed-only", "--quiet"});
    BOOST_TEST(routed.exit_code == 3, routed.err);
    BOOST_TEST(routed.err.find("a router the family's adapter does not model") != std::string::npos, routed.err);
    // No output holds MXFP4 experts: the BF16 export's config no longer announces them.
    run_ok({"convert", "-i", ckpt.string(), "-o", (dir / "bf16").string(), "--format", "bf16-safetensors", "--quiet"});
    const auto exported = json::parse(read_text(dir / "bf16" / "config.json")).as_object();
    BOOST_TEST(!exported.contains("expert_dtype"));
    BOOST_TEST(!exported.contains("quantization_config"));
    BOOST_TEST(!json::parse(read_text(dir / "rtn" / "config.json")).as_object().contains("expert_dtype"));
    auto v = run_moequant({"verify", "--source", ckpt.string(), "--converted", (dir / "rtn").string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);
}

BOOST_AUTO_TEST_CASE(gpt_oss_is_refused_by_kt_formats_and_calibration) {
    TempDir dir;
    const fs::path ckpt = dir / "oss";
    run_ok({"synth", "--family", "gpt_oss", "--dtype", "mxfp4", "--out", ckpt.string()});
    for (const char* format : {"kt-safetensors", "kt-tree"}) {
        const fs::path out = dir / format;
        auto c = run_moequant({"convert", "-i", ckpt.string(), "-o", out.string(), "--format", format, "--quiet"});
        BOOST_TEST(c.exit_code == 3, c.err);
        // Warnings first, then the one error line naming the reason.
        const auto error = c.err.substr(c.err.find("error"));
        BOOST_TEST(one_line(error), c.err);
        BOOST_TEST(error.find("format '" + std::string(format) + "' cannot hold the routed experts of gpt_oss") != std::string::npos, c.err);
        BOOST_TEST(error.find("mlp.experts.") != std::string::npos, c.err);
        BOOST_TEST(error.find("bias") != std::string::npos, c.err);
        BOOST_TEST(!fs::exists(out));
    }
    auto g = run_moequant({"gptq", "--model_id", ckpt.string(), "--output_dir", (dir / "g").string(), "--dataset", "embedded", "--quiet"});
    BOOST_TEST(g.exit_code == 4, g.err);
    BOOST_TEST(g.err.find("family 'gpt_oss' has no calibration forward pass") != std::string::npos, g.err);
    // RTN into compressed-tensors would drop the expert biases: refused the same way.
    auto rtn = run_moequant({"gptq", "--model_id", ckpt.string(), "--output_dir", (dir / "r").string(), "--quant_method", "RTN", "--quiet"});
    BOOST_TEST(rtn.exit_code == 3, rtn.err);
    BOOST_TEST(rtn.err.find("cannot hold the routed experts of gpt_oss") != std::string::npos, rtn.err);
}

// The BF16 export is transformers' dequantized GptOss layout: gate_up_proj [E, H, 2I] (each
// expert's decoded [2I, H] transposed, gate/up columns still interleaved), down_proj [E, I, H],
// biases and everything else as stored, no quantization_config.
BOOST_AUTO_TEST_CASE(gpt_oss_bf16_export_is_transformers_dequantized_layout) {
    TempDir dir;
    const fs::path ckpt = dir / "oss", out = dir / "bf16";
    run_ok({"synth", "--family", "gpt_oss", "--dtype", "mxfp4", "--out", ckpt.string()});
    run_ok({"convert", "-i", ckpt.string(), "-o", out.string(), "--format", "bf16-safetensors", "--quiet"});
    const auto cfg = json::parse(read_text(out / "config.json")).as_object();
    BOOST_TEST(!cfg.contains("quantization_config"));
    const Checkpoint src = Checkpoint::open(ckpt), dst = Checkpoint::open(out);
    const std::int64_t H = get(cfg, "hidden_size"), I = get(cfg, "intermediate_size"), E = get(cfg, "num_local_experts");
    static constexpr float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (std::int64_t l = 0; l < get(cfg, "num_hidden_layers"); ++l) {
        const std::string x = "model.layers." + std::to_string(l) + ".mlp.experts.";
        for (const auto& [name, rows, cols] : {std::tuple{std::string("gate_up_proj"), 2 * I, H}, std::tuple{std::string("down_proj"), H, I}}) {
            BOOST_TEST_CONTEXT(x + name) {
                BOOST_TEST(!dst.contains(x + name + "_blocks"));
                BOOST_TEST(!dst.contains(x + name + "_scales"));
                const TensorInfo& info = dst.info(x + name);
                BOOST_TEST((info.dtype == DType::BF16));
                BOOST_TEST((info.shape == Shape{E, cols, rows}));
                const TensorView blocks = src.view(x + name + "_blocks"), scales = src.view(x + name + "_scales");
                const TensorView got = dst.view(x + name);
                std::size_t mismatches = 0;
                for (std::int64_t e = 0; e < E; ++e)
                    for (std::int64_t r = 0; r < rows; ++r)
                        for (std::int64_t k = 0; k < cols; ++k) {
                            const std::size_t row = static_cast<std::size_t>(e * rows + r);
                            const auto byte = static_cast<std::uint8_t>(blocks.data()[row * static_cast<std::size_t>(cols / 2) + static_cast<std::size_t>(k / 2)]);
                            const auto sbyte = static_cast<std::uint8_t>(scales.data()[row * static_cast<std::size_t>(cols / 32) + static_cast<std::size_t>(k / 32)]);
                            const std::uint16_t want = bf16_round(e2m1[k % 2 == 0 ? byte & 0xF : byte >> 4] * e8m0(sbyte));
                            std::uint16_t have;
                            std::memcpy(&have, got.data() + static_cast<std::size_t>((e * cols + k) * rows + r) * 2, 2);
                            mismatches += have != want;
                        }
                BOOST_TEST(mismatches == 0u);
                const TensorView bias_in = src.view(x + name + "_bias"), bias_out = dst.view(x + name + "_bias");
                BOOST_TEST((dst.info(x + name + "_bias").shape == src.info(x + name + "_bias").shape));
                BOOST_TEST(std::memcmp(bias_in.data(), bias_out.data(), bias_in.size_bytes()) == 0);
            }
        }
        const std::string sinks = "model.layers." + std::to_string(l) + ".self_attn.sinks";
        BOOST_TEST(std::memcmp(src.view(sinks).data(), dst.view(sinks).data(), src.view(sinks).size_bytes()) == 0);
    }
    // The export's layout B with interleaved columns cannot be sliced into experts: refused, not guessed.
    auto again = run_moequant({"inspect", out.string()});
    BOOST_TEST(again.exit_code == 3, again.err);
    BOOST_TEST(one_line(again.err), again.err);
    BOOST_TEST(again.err.find("interleaves gate and up") != std::string::npos, again.err);
}

BOOST_AUTO_TEST_SUITE_END()
