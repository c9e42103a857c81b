// llama-quantize's per-tensor type choice (formats/gguf/gguf_type_policy), on the tensor sets of
// a Mixtral-like model (8 experts: llama.cpp's special case) and a Qwen3-MoE-like one (128
// experts), each expectation worked out from llama.cpp's src/llama-quant.cpp (007dbbf) by hand.
#include "gguf_type_policy.hpp"

#include <moequant/error.hpp>

#include <boost/test/unit_test.hpp>

#include <map>

using namespace moequant;
using namespace moequant::formats;
using namespace moequant::formats::ggml_type_id;

namespace {

// A MoE model's GGUF tensors as the converter writes them in BF16 (norms, routers: F32).
std::vector<GgufTensorType> moe_tensors(int layers, int experts, std::int64_t hidden, std::int64_t ff, std::int64_t kv) {
    std::vector<GgufTensorType> t = {
        {"token_embd.weight", {hidden, 1000}, bf16},
        {"output_norm.weight", {hidden}, f32},
        {"output.weight", {hidden, 1000}, bf16},
    };
    for (int l = 0; l < layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        t.push_back({b + "attn_norm.weight", {hidden}, f32});
        t.push_back({b + "attn_q.weight", {hidden, hidden}, bf16});
        t.push_back({b + "attn_k.weight", {hidden, kv}, bf16});
        t.push_back({b + "attn_v.weight", {hidden, kv}, bf16});
        t.push_back({b + "attn_output.weight", {hidden, hidden}, bf16});
        t.push_back({b + "ffn_norm.weight", {hidden}, f32});
        t.push_back({b + "ffn_gate_inp.weight", {hidden, experts}, f32});
        t.push_back({b + "ffn_gate_exps.weight", {hidden, ff, experts}, bf16});
        t.push_back({b + "ffn_up_exps.weight", {hidden, ff, experts}, bf16});
        t.push_back({b + "ffn_down_exps.weight", {ff, hidden, experts}, bf16});
    }
    return t;
}

std::map<std::string, std::uint32_t> chosen(const std::vector<GgufTensorType>& tensors, const GgufModelFacts& facts,
                                            const GgufTypeRequest& request) {
    std::map<std::string, std::uint32_t> out;
    for (const auto& t : choose_gguf_types(tensors, facts, request)) out[t.name] = t.type;
    return out;
}

GgufTypeRequest preset(const char* name) { return {.preset = gguf_preset_named(name).value()}; }

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_type_policy)

BOOST_AUTO_TEST_CASE(presets_and_types_are_named_as_llama_quantize_names_them) {
    BOOST_TEST(gguf_preset_named("q4_k_m")->file_type == 15u);
    BOOST_TEST(gguf_preset_named("Q4_K")->name == "Q4_K_M");
    BOOST_TEST(gguf_preset_named("IQ4_XS")->default_type == iq4_xs);
    BOOST_TEST(gguf_preset_named("MXFP4_MOE")->file_type == 38u);
    BOOST_TEST(!gguf_preset_named("IQ2_XXS"));  // needs types moequant does not write
    BOOST_TEST(ggml_type_named_id("Q6_K").value() == q6_k);
    BOOST_TEST(ggml_type_name_of(q4_k) == "q4_K");
    BOOST_CHECK_THROW(parse_tensor_type_override("ffn_down"), Error);
    BOOST_CHECK_THROW(parse_tensor_type_override("ffn_down=q9_9"), Error);
    BOOST_CHECK_THROW(parse_tensor_type_override("ffn_(=q8_0"), Error);
    BOOST_TEST(parse_tensor_type_override("FFN_Down=Q8_0").pattern == "ffn_down");
}

BOOST_AUTO_TEST_CASE(q4_k_m_on_an_eight_expert_model) {
    const auto types = chosen(moe_tensors(4, 8, 256, 512, 64), {.n_expert = 8, .n_gqa = 4, .n_layer = 4}, preset("Q4_K_M"));
    BOOST_TEST(types.at("token_embd.weight") == q4_k);  // untied: the preset's type
    BOOST_TEST(types.at("output.weight") == q6_k);
    BOOST_TEST(types.at("output_norm.weight") == f32);
    for (int l = 0; l < 4; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        BOOST_TEST(types.at(b + "attn_q.weight") == q4_k);
        BOOST_TEST(types.at(b + "attn_k.weight") == q8_0);       // 8 experts
        BOOST_TEST(types.at(b + "attn_v.weight") == q8_0);       // 8 experts
        BOOST_TEST(types.at(b + "attn_output.weight") == q5_k);  // 8 experts
        BOOST_TEST(types.at(b + "ffn_gate_inp.weight") == f32);
        BOOST_TEST(types.at(b + "ffn_gate_exps.weight") == q4_k);
        // use_more_bits(l, 4): layers 2 and 3
        BOOST_TEST(types.at(b + "ffn_down_exps.weight") == (l >= 2 ? q6_k : q4_k), b);
    }
}

BOOST_AUTO_TEST_CASE(q4_k_m_and_iq4_xs_on_a_128_expert_model) {
    const auto tensors = moe_tensors(8, 128, 256, 256, 32);
    const GgufModelFacts facts{.n_expert = 128, .n_gqa = 8, .n_layer = 8};
    const auto q4km = chosen(tensors, facts, preset("Q4_K_M"));
    for (int l = 0; l < 8; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        const bool more = l == 0 || l == 3 || l == 6 || l == 7;  // use_more_bits(l, 8)
        BOOST_TEST(q4km.at(b + "attn_v.weight") == (more ? q6_k : q4_k), b);
        BOOST_TEST(q4km.at(b + "ffn_down_exps.weight") == (more ? q6_k : q4_k), b);
        BOOST_TEST(q4km.at(b + "attn_k.weight") == q4_k);
        BOOST_TEST(q4km.at(b + "attn_output.weight") == q4_k);
    }
    const auto iq4 = chosen(tensors, facts, preset("IQ4_XS"));
    BOOST_TEST(iq4.at("blk.0.ffn_down_exps.weight") == q5_k);  // first n/8 layers, no importance matrix
    BOOST_TEST(iq4.at("blk.1.ffn_down_exps.weight") == iq4_xs);
    BOOST_TEST(iq4.at("blk.5.attn_v.weight") == q5_k);  // n_gqa >= 4
    BOOST_TEST(iq4.at("output.weight") == q6_k);
    GgufTypeRequest with_importance = preset("IQ4_XS");
    with_importance.has_importance = true;
    BOOST_TEST(chosen(tensors, facts, with_importance).at("blk.0.ffn_down_exps.weight") == iq4_xs);
}

BOOST_AUTO_TEST_CASE(q8_0_mxfp4_moe_and_float_presets) {
    const auto tensors = moe_tensors(2, 8, 256, 512, 64);
    const GgufModelFacts facts{.n_expert = 8, .n_gqa = 4, .n_layer = 2};
    for (const auto& [name, type] : chosen(tensors, facts, preset("Q8_0")))
        BOOST_TEST(type == (name.find("norm") != std::string::npos || name.find("gate_inp") != std::string::npos ? f32 : q8_0), name);
    const auto mx = chosen(tensors, facts, preset("MXFP4_MOE"));
    BOOST_TEST(mx.at("blk.1.ffn_down_exps.weight") == mxfp4);
    BOOST_TEST(mx.at("blk.1.attn_q.weight") == q8_0);
    BOOST_TEST(mx.at("output.weight") == q8_0);
    const auto bf = chosen(tensors, facts, preset("BF16"));
    BOOST_TEST(bf.at("blk.0.ffn_down_exps.weight") == bf16);
    BOOST_TEST(bf.at("output.weight") == bf16);  // a float preset has no mixture
    BOOST_TEST(bf.at("blk.0.ffn_norm.weight") == f32);
}

BOOST_AUTO_TEST_CASE(overrides_pure_and_fallbacks) {
    auto tensors = moe_tensors(4, 8, 256, 512, 64);
    tensors.push_back({"blk.0.attn_q_b.weight", {96, 256}, bf16});   // rows of 96: Q4_K -> Q5_0
    tensors.push_back({"blk.0.attn_k_b.weight", {100, 256}, bf16});  // rows of 100: Q4_K -> Q5_0 -> F16
    const GgufModelFacts facts{.n_expert = 8, .n_gqa = 4, .n_layer = 4};
    GgufTypeRequest request = preset("Q4_K_M");
    request.overrides.push_back(parse_tensor_type_override("ffn_down_exps=q8_0"));
    request.overrides.push_back(parse_tensor_type_override("blk\\.[0-1]\\.attn=q5_K"));
    const auto types = choose_gguf_types(tensors, facts, request);
    std::map<std::string, GgufTensorType> by_name;
    for (const auto& t : types) by_name[t.name] = t;
    BOOST_TEST(by_name.at("blk.3.ffn_down_exps.weight").type == q8_0);
    BOOST_TEST(by_name.at("blk.1.attn_v.weight").type == q5_k);  // the override, not the 8-expert Q8_0
    BOOST_TEST(by_name.at("blk.2.attn_v.weight").type == q8_0);
    // Matched by the second pattern, then the fallback as for any type: rows of 96 take Q5_1, of 100 F16.
    BOOST_TEST(by_name.at("blk.0.attn_q_b.weight").type == q5_1);
    BOOST_TEST(by_name.at("blk.0.attn_k_b.weight").type == f16);
    GgufTypeRequest plain = preset("Q4_K_M");
    const auto fallback = choose_gguf_types(tensors, facts, plain);
    for (const auto& t : fallback) {
        if (t.name == "blk.0.attn_q_b.weight") BOOST_TEST((t.type == q5_0 && t.fell_back));
        if (t.name == "blk.0.attn_k_b.weight") BOOST_TEST((t.type == f16 && t.fell_back));
    }
    GgufTypeRequest pure = preset("Q4_K_M");
    pure.pure = true;
    const auto p = chosen(tensors, facts, pure);
    BOOST_TEST(p.at("output.weight") == q4_k);  // --pure: no output rule either
    BOOST_TEST(p.at("blk.3.ffn_down_exps.weight") == q4_k);
    GgufTypeRequest leave = preset("Q4_K_M");
    leave.leave_output = true;
    BOOST_TEST(chosen(tensors, facts, leave).at("output.weight") == bf16);
    // Tensors are walked in llama-quantize's order: outside blocks by name, then block by block.
    BOOST_TEST(types.front().name == "output.weight");
    BOOST_TEST(types.back().name.rfind("blk.3.", 0) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
