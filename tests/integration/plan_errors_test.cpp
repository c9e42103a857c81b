// Checkpoints that break a family's conventions: each is one clear error naming the tensor or
// config key, with exit code 3. They are made by synthesizing a good checkpoint and rewriting
// it with one defect.

#include "checkpoint_rewrite.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/sharded_writer.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>
#include <map>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

void synth(const fs::path& out, const std::string& family, const std::string& dtype, const std::string& layout = "per-expert") {
    auto r = run_moequant({"synth", "--family", family, "--dtype", dtype, "--layout", layout, "--out", out.string()});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
}

void expect_plan_error(const fs::path& ckpt, const std::vector<std::string>& parts, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"inspect", ckpt.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_moequant(args);
    BOOST_TEST(r.exit_code == 3, "exit " << r.exit_code << ": " << r.err);
    BOOST_TEST(r.out.empty());
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    for (const auto& p : parts) BOOST_TEST(r.err.find(p) != std::string::npos, "missing '" << p << "' in: " << r.err);
}

const std::string expert0 = "model.layers.1.mlp.experts.0.";

}  // namespace

BOOST_AUTO_TEST_SUITE(plan_errors)

BOOST_AUTO_TEST_CASE(missing_scale_tensor) {
    TempDir dir;
    synth(dir / "good", "deepseek_v3", "fp8");
    rewrite(dir / "good", dir / "bad", [](const std::string& name, auto&) { return name != expert0 + "gate_proj.weight_scale_inv"; });
    expect_plan_error(dir / "bad", {expert0 + "gate_proj.weight", "scale tensor", "MissingScale"});
}

BOOST_AUTO_TEST_CASE(scale_with_the_wrong_shape) {
    TempDir dir;
    synth(dir / "good", "deepseek_v3", "fp8");
    rewrite_as_zeros(dir / "good", dir / "bad", expert0 + "down_proj.weight_scale_inv", DType::F32, {1, 2});
    expect_plan_error(dir / "bad", {expert0 + "down_proj.weight_scale_inv", "[1,2]", "expected [2,2] (block [128,128])",
                                    "ScaleShapeMismatch"});
}

BOOST_AUTO_TEST_CASE(missing_expert_tensor) {
    TempDir dir;
    synth(dir / "good", "glm4_moe", "bf16");
    rewrite(dir / "good", dir / "bad", [](const std::string& name, auto&) { return name != "model.layers.2.mlp.experts.5.up_proj.weight"; });
    expect_plan_error(dir / "bad", {"model.layers.2.mlp.experts.5.up_proj.weight", "MissingTensor", "8 experts"});
}

BOOST_AUTO_TEST_CASE(config_missing_required_fields) {
    TempDir dir;
    synth(dir / "good", "deepseek_v3", "bf16");
    rewrite_config(dir / "good", dir / "no_experts", [](json::object& c) { c.erase("n_routed_experts"); });
    expect_plan_error(dir / "no_experts", {"config.json", "n_routed_experts", "InvalidConfig"});
    rewrite_config(dir / "good", dir / "no_layers", [](json::object& c) { c.erase("num_hidden_layers"); });
    expect_plan_error(dir / "no_layers", {"num_hidden_layers", "InvalidConfig"});
}

BOOST_AUTO_TEST_CASE(fp8_without_a_block_size) {
    TempDir dir;
    synth(dir / "good", "qwen3_next", "fp8");
    rewrite_config(dir / "good", dir / "bad", [](json::object& c) { c.erase("quantization_config"); });
    expect_plan_error(dir / "bad", {"weight_block_size", "MissingBlockSize"});
}

BOOST_AUTO_TEST_CASE(config_and_tensors_disagree) {
    TempDir dir;
    synth(dir / "good", "deepseek_v3", "bf16");
    rewrite_config(dir / "good", dir / "size", [](json::object& c) { c["moe_intermediate_size"] = 128; });
    expect_plan_error(dir / "size", {expert0 + "gate_proj.weight", "[256,256]", "implies [128,256]", "ShapeMismatch"});
    rewrite_config(dir / "good", dir / "count", [](json::object& c) {
        c["n_routed_experts"] = 4;
        c["n_group"] = 1;
    });
    expect_plan_error(dir / "count", {"expert index 4", "4 experts", "UnexpectedExpert"});
}

BOOST_AUTO_TEST_CASE(ambiguous_fused_shapes_are_refused) {
    TempDir dir;
    synth(dir / "good", "qwen3_moe", "bf16", "fused-bmm");
    // A gate_up of [E, H, I] holds only one of the two projections: neither layout fits, and
    // guessing which half is missing would silently mis-split.
    rewrite_as_zeros(dir / "good", dir / "bad", "model.layers.0.mlp.experts.gate_up_proj", DType::BF16, {8, 256, 256});
    expect_plan_error(dir / "bad", {"model.layers.0.mlp.experts.gate_up_proj", "neither layout A", "AmbiguousFusedLayout"});
}

BOOST_AUTO_TEST_CASE(fused_expert_bias_of_the_wrong_shape_is_refused) {
    TempDir dir;
    synth(dir / "good", "gpt_oss", "mxfp4", "fused-linear");
    // gpt-oss's gate_up bias has one entry per interleaved row, [E, 2I]: [E, I] is not it.
    rewrite_as_zeros(dir / "good", dir / "bad", "model.layers.1.mlp.experts.gate_up_proj_bias", DType::BF16, {4, 256});
    expect_plan_error(dir / "bad", {"model.layers.1.mlp.experts.gate_up_proj_bias", "[4,256]", "[4,512]", "ShapeMismatch"});
}

BOOST_AUTO_TEST_CASE(unknown_model_type_lists_the_installed_adapters_and_family_overrides) {
    TempDir dir;
    synth(dir / "good", "deepseek_v3", "bf16");
    rewrite_config(dir / "good", dir / "odd", [](json::object& c) { c["model_type"] = "deepseek_v9_custom"; });
    expect_plan_error(dir / "odd", {"deepseek_v9_custom", "UnknownFamily", "deepseek_v3 (deepseek_v3, kimi_k2, deepseek_v32, kimi_k25, glm_moe_dsa)",
                                    "mixtral (mixtral)", "--family"});
    auto overridden = run_moequant({"inspect", "--family", "deepseek_v3", (dir / "odd").string()});
    BOOST_TEST(overridden.exit_code == 0, overridden.err);
    BOOST_TEST(overridden.out.find("chosen with --family") != std::string::npos);
    auto unknown = run_moequant({"inspect", "--family", "no_such_family", (dir / "odd").string()});
    BOOST_TEST(unknown.exit_code == 2);
    BOOST_TEST(unknown.err.find("installed") != std::string::npos);
}

// MiniMax-M2: a w3 (up) expert tensor of the wrong shape is refused; a missing router bias is
// not a plan error (routed-only calibration is what needs the router tensors).
BOOST_AUTO_TEST_CASE(minimax_m2_expert_shape_and_router_bias) {
    TempDir dir;
    synth(dir / "good", "minimax_m2", "bf16");
    const std::string w3 = "model.layers.1.block_sparse_moe.experts.3.w3.weight";
    rewrite_as_zeros(dir / "good", dir / "shape", w3, DType::BF16, {128, 256});
    expect_plan_error(dir / "shape", {w3, "[128,256]", "ShapeMismatch"});
    rewrite(dir / "good", dir / "no_bias",
            [](const std::string& name, auto&) { return name != "model.layers.0.block_sparse_moe.e_score_correction_bias"; });
    auto r = run_moequant({"inspect", (dir / "no_bias").string()});
    BOOST_TEST(r.exit_code == 0, r.err);
}

// The 2026 families: a missing part of an encoded expert (compressed-tensors INT4 under Kimi-K2.5's
// language_model. prefix, DeepSeek-V4's MXFP4 scale under names without model.), a missing expert
// of DeepSeek-V3.2, and Kimi-K2.5's expert count missing from text_config.
BOOST_AUTO_TEST_CASE(new_families_name_the_broken_tensor_or_key) {
    TempDir dir;
    const std::string k25 = "language_model.model.layers.1.mlp.experts.2.down_proj.";
    synth(dir / "k25", "kimi_k25", "int4-ct");
    rewrite(dir / "k25", dir / "k25_scale", [&](const std::string& name, auto&) { return name != k25 + "weight_scale"; });
    expect_plan_error(dir / "k25_scale", {k25 + "weight_scale", "MissingScale"});

    synth(dir / "v4", "deepseek_v4", "mxfp4");
    const std::string v4 = "layers.1.ffn.experts.0.w1.";
    rewrite(dir / "v4", dir / "v4_scale", [&](const std::string& name, auto&) { return name != v4 + "scale"; });
    // An I8 weight without its E8M0 scale is not recognisable as MXFP4 (nor as anything else).
    expect_plan_error(dir / "v4_scale", {v4 + "weight", "I8 [256,128]", "UnsupportedEncoding", "mxfp4"});

    synth(dir / "v32", "deepseek_v32", "fp8");
    const std::string v32 = "model.layers.2.mlp.experts.7.gate_proj.weight";
    rewrite(dir / "v32", dir / "v32_expert", [&](const std::string& name, auto&) {
        return name != v32 && name != v32 + "_scale_inv";
    });
    expect_plan_error(dir / "v32_expert", {v32, "MissingTensor", "8 experts"});

    fs::copy(dir / "k25", dir / "k25_config", fs::copy_options::recursive);
    json::value config = json::parse(read_text(dir / "k25/config.json"));
    config.at("text_config").as_object().erase("n_routed_experts");
    write_text(dir / "k25_config/config.json", json::serialize(config));
    expect_plan_error(dir / "k25_config", {"config.json", "n_routed_experts"});
}

// MiniMax-M3: moe_layer_freq must list every layer, an activation it does not know is refused,
// and a calibration sample longer than its sparse attention keeps whole is refused before
// an output looks complete.
BOOST_AUTO_TEST_CASE(minimax_m3_layer_list_activation_and_sparse_window) {
    TempDir dir;
    synth(dir / "good", "minimax_m3", "bf16");
    rewrite_config(dir / "good", dir / "freq", [](json::object& c) { c.at("text_config").as_object()["moe_layer_freq"] = json::array{0, 1}; });
    expect_plan_error(dir / "freq", {"config.json", "moe_layer_freq", "3 layers", "InvalidConfig"});
    rewrite_config(dir / "good", dir / "act", [](json::object& c) { c.at("text_config").as_object()["hidden_act"] = "gelu"; });
    expect_plan_error(dir / "act", {"config.json", "hidden_act 'gelu'", "InvalidConfig"});
    rewrite_config(dir / "good", dir / "window", [](json::object& c) {
        c.at("text_config").as_object().at("sparse_attention_config").as_object()["sparse_topk_blocks"] = 2;  // 64 tokens
    });
    auto r = run_moequant({"gptq", "--model_id", (dir / "window").string(), "--output_dir", (dir / "out").string(), "--dataset",
                           "embedded", "--quiet"});
    BOOST_TEST(r.exit_code == 3, r.err);
    BOOST_TEST(r.err.find("SequenceTooLong") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("--max_sequence_length 64") != std::string::npos, r.err);
    BOOST_TEST(!fs::exists(dir / "out" / "config.json"));  // nothing that looks complete
    auto fits = run_moequant({"gptq", "--model_id", (dir / "window").string(), "--output_dir", (dir / "out").string(), "--dataset",
                              "embedded", "--max_sequence_length", "64", "--quiet"});
    BOOST_TEST(fits.exit_code == 0, fits.err);
}

BOOST_AUTO_TEST_CASE(checkpoints_without_config_are_summarised_without_a_plan) {
    auto r = run_moequant({"inspect", (fixtures_dir() / "safetensors_jl_testdata/sharded").string()});
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(r.out.find("family not detected") != std::string::npos);
}

// Qwen3.5-MoE (model-families-2026.md §3.6): a fused down_proj that fits neither layout names
// the fused pair; its text_config's keys are the ones read (num_experts missing is named); and
// its forward refuses a layer_types list of the wrong length or an unsupported rope_type.
BOOST_AUTO_TEST_CASE(qwen3_5_moe_fused_shapes_and_text_config) {
    TempDir dir;
    synth(dir / "good", "qwen3_5_moe", "bf16", "fused-linear");
    const std::string down = "model.language_model.layers.2.mlp.experts.down_proj";
    rewrite_as_zeros(dir / "good", dir / "down", down, DType::BF16, {8, 256, 128});
    expect_plan_error(dir / "down", {"model.language_model.layers.2.mlp.experts.gate_up_proj", "[8,256,128]", "neither layout A",
                                     "AmbiguousFusedLayout"});
    rewrite_config(dir / "good", dir / "no_experts", [](json::object& c) { c.at("text_config").as_object().erase("num_experts"); });
    expect_plan_error(dir / "no_experts", {"config.json", "num_experts", "InvalidConfig"});
    const std::pair<const char*, std::function<void(json::object&)>> edits[] = {
        {"layer_types lists 3 layers", [](json::object& t) { t.at("layer_types").as_array().pop_back(); }},
        {"rope_type 'yarn'", [](json::object& t) { t.at("rope_parameters").as_object()["rope_type"] = "yarn"; }},
    };
    for (const auto& [message, edit_text_config] : edits) {
        const auto& edit = edit_text_config;  // clang 14 cannot capture a structured binding
        rewrite_config(dir / "good", dir / "forward", [&edit](json::object& c) { edit(c.at("text_config").as_object()); });
        auto r = run_moequant({"record", "--model_id", (dir / "forward").string(), "--dataset", "embedded", "--output",
                               (dir / "acts.safetensors").string(), "--quiet"});
        BOOST_TEST(r.exit_code == 3, r.err);
        for (const char* part : {message, "config.json", "InvalidConfig"})
            BOOST_TEST(r.err.find(part) != std::string::npos, "missing '" << part << "' in: " << r.err);
        fs::remove_all(dir / "forward");
    }
}

// GLM-5: mlp_layer_types decides the MoE layers in transformers, first_k_dense_replace in older
// readers; a config where they disagree, or a list of the wrong length, is refused by name.
BOOST_AUTO_TEST_CASE(glm_moe_dsa_mlp_layer_types_must_agree_with_first_k_dense_replace) {
    TempDir dir;
    synth(dir / "good", "glm_moe_dsa", "bf16");
    rewrite_config(dir / "good", dir / "disagree", [](json::object& c) { c["mlp_layer_types"] = json::array{"dense", "dense", "sparse"}; });
    expect_plan_error(dir / "disagree", {"config.json", "'mlp_layer_types' makes layer 1 dense", "first_k_dense_replace (1)",
                                         "InvalidConfig"});
    rewrite_config(dir / "good", dir / "short", [](json::object& c) { c["mlp_layer_types"] = json::array{"dense", "sparse"}; });
    expect_plan_error(dir / "short", {"config.json", "'mlp_layer_types'", "3 layers (num_hidden_layers)", "InvalidConfig"});
}

BOOST_AUTO_TEST_CASE(glm_moe_dsa_missing_expert_is_named) {
    TempDir dir;
    synth(dir / "good", "glm_moe_dsa", "fp8");
    const std::string gone = "model.layers.2.mlp.experts.7.down_proj.weight";
    rewrite(dir / "good", dir / "bad", [&](const std::string& name, auto&) { return name.rfind(gone, 0) != 0; });
    expect_plan_error(dir / "bad", {gone, "MissingTensor", "8 experts"});
}

BOOST_AUTO_TEST_SUITE_END()
