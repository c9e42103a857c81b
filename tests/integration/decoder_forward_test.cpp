// The families' decoder forward against torch outputs of the Hugging Face modeling code
// (tests/data/decoder_forward/make_reference.py, run once on the checkpoint `moequant synth`
// makes with its default seed, BF16): the first layers on two samples, the attention half's residual, the
// MLP block's input, the router's choices and weights, the layer output, and the logits (final
// norm and head) of the last layer's output, float32 within 1e-4 relative error; and the same
// with --compute-dtype bf16 against torch with BF16 products (bf16_products_match_torch_in_bfloat16).
#include "bf16_products_here.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/compute_dtype.hpp>
#include <moequant/decoder_forward.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/safetensors_reader.hpp>

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <numeric>

using namespace moequant;
using namespace moequant::test;

namespace {

template <class T>
std::vector<T> values(const SafetensorsFile& f, const std::string& name) {
    const TensorView v = f.view(name);
    std::vector<T> out(v.size_bytes() / sizeof(T));
    std::memcpy(out.data(), v.data(), v.size_bytes());
    return out;
}


// The adapter owning a family id, model type or release.
std::string plugin_of(const std::string& family) {
    const bool deepseek = family == "kimi_k2" || family == "kimi_k25" || family == "kimi_k26" || family == "deepseek_v32" ||
                          family == "glm_moe_dsa";
    return deepseek ? "deepseek_v3" : family == "qwen3_5_moe" ? "qwen3_next" : family == "minimax_m27" ? "minimax_m2" : family;
}

// `reference` names the file in tests/data/decoder_forward (default: the family's, with the
// preset's name after it unless tiny); `tolerance` bounds every tensor's max_relative_error,
// `weight_tolerance` the router weights'. Returns the layer outputs and logits it computed.
std::vector<std::vector<float>> check_family(const std::string& family, const std::string& dtype = "bf16",
                                             const std::string& preset = "tiny", std::string reference = {},
                                             double tolerance = 1e-4, double weight_tolerance = 1e-5) {
    std::vector<std::vector<float>> computed;
    TempDir dir;
    auto synth = run_moequant({"synth", "--family", family, "--dtype", dtype, "--preset", preset, "--out", (dir / "m").string()});
    BOOST_REQUIRE_MESSAGE(synth.exit_code == 0, synth.err);
    if (reference.empty()) reference = family + (preset == "tiny" ? "" : "_" + preset);
    const SafetensorsFile want =
        SafetensorsFile::open(fs::path(MOEQUANT_SOURCE_DIR) / "tests/data/decoder_forward" / (reference + ".safetensors"));

    const std::string plugin = plugin_of(family);
    Registry registry;
    registry.load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / ("moequant-adapter-" + plugin + ".so"), PluginOrigin::explicit_file);
    for (const char* encoding : {"float", "fp8"})
        registry.load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / ("moequant-encoding-" + std::string(encoding) + ".so"),
                           PluginOrigin::explicit_file);
    const ModelAdapter* adapter = registry.adapter(plugin);
    BOOST_REQUIRE(adapter);
    Checkpoint checkpoint = Checkpoint::open(dir / "m");
    attach_encodings(checkpoint, registry);
    const ModelConfig config = checkpoint.config();
    const ModelPlan plan = adapter->plan(config, checkpoint);
    const auto forward = adapter->decoder_forward(config, checkpoint, plan);

    const std::vector<std::int32_t> ids = values<std::int32_t>(want, "ids");
    std::vector<std::int64_t> lengths;
    for (auto n : values<std::int32_t>(want, "sample_lengths")) lengths.push_back(n);
    std::vector<float> x = forward->embed(ids);
    int layers = 0;
    while (want.find("layer" + std::to_string(layers) + ".output")) ++layers;
    BOOST_TEST(layers >= 2);
    for (int layer = 0; layer < layers; ++layer) {
        BOOST_TEST_CONTEXT(family << " layer " << layer) {
            const std::string l = "layer" + std::to_string(layer) + ".";
            const auto decoder = forward->layer(layer);
            const std::vector<float> mlp_input = decoder->attention(x, lengths);
            BOOST_TEST(max_relative_error(x, values<float>(want, l + "residual")) < tolerance);
            BOOST_TEST(max_relative_error(mlp_input, values<float>(want, l + "mlp_input")) < tolerance);
            Routing routing;
            decoder->mlp(mlp_input, x, {}, &routing);
            BOOST_TEST(max_relative_error(x, values<float>(want, l + "output")) < tolerance);
            computed.push_back(x);
            if (!want.find(l + "experts")) {  // a dense layer
                BOOST_TEST(routing.experts.empty());
                continue;
            }
            std::vector<std::int32_t> chosen(routing.experts.begin(), routing.experts.end());
            BOOST_TEST(chosen == values<std::int32_t>(want, l + "experts"), boost::test_tools::per_element());
            BOOST_TEST(max_relative_error(routing.weights, values<float>(want, l + "weights")) < weight_tolerance);
        }
    }
    // The final norm and head on the reference's last output (so only they are under test).
    BOOST_TEST_CONTEXT(family << " logits") {
        BOOST_REQUIRE(want.find("logits"));
        const std::vector<float> last = values<float>(want, "layer" + std::to_string(layers - 1) + ".output");
        computed.push_back(forward->logits(last));
        BOOST_TEST(max_relative_error(computed.back(), values<float>(want, "logits")) < tolerance);
    }
    return computed;
}

// The outputs (layers, then logits) a reference file holds, as check_family returns them.
std::vector<std::vector<float>> reference_outputs(const std::string& reference) {
    const SafetensorsFile f =
        SafetensorsFile::open(fs::path(MOEQUANT_SOURCE_DIR) / "tests/data/decoder_forward" / (reference + ".safetensors"));
    std::vector<std::vector<float>> out;
    for (int layer = 0; f.find("layer" + std::to_string(layer) + ".output"); ++layer)
        out.push_back(values<float>(f, "layer" + std::to_string(layer) + ".output"));
    out.push_back(values<float>(f, "logits"));
    return out;
}

double relative_rms_error(const std::vector<float>& got, const std::vector<float>& want) {
    double diff = 0, energy = 0;
    for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
        diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
        energy += static_cast<double>(want[i]) * want[i];
    }
    return got.size() == want.size() ? std::sqrt(diff / energy) : INFINITY;
}



}  // namespace

BOOST_AUTO_TEST_SUITE(decoder_forward)

BOOST_AUTO_TEST_CASE(qwen3_moe_layers_match_the_reference) { check_family("qwen3_moe"); }

BOOST_AUTO_TEST_CASE(mixtral_layers_match_the_reference) { check_family("mixtral"); }

BOOST_AUTO_TEST_CASE(glm4_moe_dense_and_moe_layers_match_the_reference) { check_family("glm4_moe"); }

// GLM-4.6/4.7's settings (the small preset): per-head q/k RMSNorm, routed_scaling_factor 2.5.
BOOST_AUTO_TEST_CASE(glm47_qk_norm_layers_match_the_reference) { check_family("glm4_moe", "bf16", "small"); }

// MLA with YaRN, the group-limited sigmoid router, shared experts, a dense first layer, and
// FP8 weights dequantized on the fly.
BOOST_AUTO_TEST_CASE(deepseek_v3_fp8_mla_layers_match_the_reference) { check_family("deepseek_v3", "fp8"); }

// Gated DeltaNet (layers 0-2) and gated attention (layer 3), zero-centred norms, the shared
// expert's sigmoid gate.
BOOST_AUTO_TEST_CASE(qwen3_next_linear_and_full_attention_layers_match_the_reference) { check_family("qwen3_next"); }

// Kimi-K2: the same adapter with one expert group, YaRN with beta_fast 1, rotary buffers.
BOOST_AUTO_TEST_CASE(kimi_k2_layers_match_the_reference) { check_family("kimi_k2", "fp8"); }

// Kimi-K2.5: Kimi-K2's language model inside the multimodal checkpoint (text_config, the
// language_model. tensor names), the vision tower and projector not read.
BOOST_AUTO_TEST_CASE(kimi_k25_layers_match_the_reference) { check_family("kimi_k25", "fp8"); }

// Kimi-K2.6's release: K2.5's forward with YaRN factor 64 over its 262144 positions.
BOOST_AUTO_TEST_CASE(kimi_k26_layers_match_the_reference) { check_family("kimi_k26", "fp8"); }

// DeepSeek-V3.2: V3's forward on a checkpoint with indexer tensors, samples within index_topk.
BOOST_AUTO_TEST_CASE(deepseek_v32_layers_match_the_reference) { check_family("deepseek_v32", "fp8"); }

// MiniMax-M2: q/k RMSNorm over the whole projection, rotary on rotary_dim of head_dim, the F32
// sigmoid router with its bias beside the gate, FP8 weights as released.
BOOST_AUTO_TEST_CASE(minimax_m2_fp8_layers_match_the_reference) { check_family("minimax_m2", "fp8"); }
// Gemma norms, per-head q/k norms, swigluoai in the experts, shared expert and dense layer,
// the routed output scaled by 2, moe_layer_freq; its language model under language_model.
BOOST_AUTO_TEST_CASE(minimax_m3_layers_match_the_reference) { check_family("minimax_m3"); }

// MiniMax-M2.7's release: M2's tensors (the same draws) and forward; its longer
// max_position_embeddings changes no rotary frequency, so M2's reference holds.
BOOST_AUTO_TEST_CASE(minimax_m27_layers_match_m2s_reference) { check_family("minimax_m27", "fp8", "tiny", "minimax_m2"); }

// Qwen3.5-MoE: Qwen3-Next's layers with the split in_proj_qkv / z / b / a projections, rope from
// rope_parameters, the always-renormalized router, experts fused in layout A (synth's BF16 default).
BOOST_AUTO_TEST_CASE(qwen3_5_moe_fused_layers_match_the_reference) { check_family("qwen3_5_moe"); }

// GLM-5: V3.2's MLA with v_head_dim != qk_nope_head_dim, rope_parameters' theta without YaRN,
// one expert group, mlp_layer_types; a "shared" indexer layer (no indexer tensors).
BOOST_AUTO_TEST_CASE(glm_moe_dsa_layers_match_the_reference) { check_family("glm_moe_dsa"); }

// GLM-5-FP8: the same forward on block-128 FP8 weights dequantized on the fly.
BOOST_AUTO_TEST_CASE(glm_moe_dsa_fp8_layers_match_the_reference) { check_family("glm_moe_dsa", "fp8", "tiny", "glm_moe_dsa_fp8"); }

// --compute-dtype bf16 (make_reference.py's product modes). With every product's operands
// rounded to BF16 and FP32 accumulation, torch computes what moequant does up to summation
// order: the same experts, relative RMS error below 1e-3 on every output (measured: 6e-6 and
// below, but 4.6e-4 on DeepSeek-V3's MoE layers, where some operand is formed in another order
// than torch's and so rounds to a neighbouring BF16 value), the largest element error below 3e-3. Against torch's own bfloat16 matmul
// (results rounded to BF16 too) within 3e-2 (the same experts as well), and moequant, keeping
// FP32 results, is closer to the float32 model than that run on every layer output.
BOOST_AUTO_TEST_CASE(bf16_products_match_torch_in_bfloat16, *boost::unit_test::precondition(test::bf16_products_here)) {
    for (const auto& [family, dtype] : {std::pair{"qwen3_moe", "bf16"}, {"deepseek_v3", "fp8"}}) {
        BOOST_TEST_CONTEXT(family) {
            const test::ComputeDtypeScope bf16;
            const std::string emulated = std::string(family) + "_bf16_operands", torch_bf16 = std::string(family) + "_bf16";
            const auto ours = check_family(family, dtype, "tiny", emulated, 3e-3, 3e-3);
            check_family(family, dtype, "tiny", torch_bf16, 3e-2, 3e-2);
            const auto exact = reference_outputs(family), same_rounding = reference_outputs(emulated),
                       torch = reference_outputs(torch_bf16);
            BOOST_REQUIRE(ours.size() == exact.size());
            for (std::size_t i = 0; i < ours.size(); ++i) {
                BOOST_TEST(relative_rms_error(ours[i], same_rounding[i]) < 1e-3, "output " << i << ": " << relative_rms_error(ours[i], same_rounding[i]));
                if (i + 1 < ours.size())  // the layers (the logits start from the reference's last output)
                    BOOST_TEST(relative_rms_error(ours[i], exact[i]) < relative_rms_error(torch[i], exact[i]), "layer " << i);
            }
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
