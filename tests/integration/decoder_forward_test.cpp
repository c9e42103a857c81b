// The families' decoder forward against torch outputs of the Hugging Face modeling code
// (tests/data/decoder_forward/make_reference.py, run once on the checkpoint `moequant synth`
// makes with its default seed, BF16): the first layers on two samples, the attention half's residual, the
// MLP block's input, the router's choices and weights, the layer output, and the logits (final
// norm and head) of the last layer's output, float32 within 1e-4 relative error.
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
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


// The adapter owning a family id.
std::string plugin_of(const std::string& family) {
    const bool deepseek = family == "kimi_k2" || family == "kimi_k25" || family == "deepseek_v32" || family == "glm_moe_dsa";
    return deepseek ? "deepseek_v3" : family == "qwen3_5_moe" ? "qwen3_next" : family;
}

// `reference` names the file in tests/data/decoder_forward (default: the family's, with the
// preset's name after it unless tiny).
void check_family(const std::string& family, const std::string& dtype = "bf16", const std::string& preset = "tiny",
                  std::string reference = {}) {
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
            BOOST_TEST(max_relative_error(x, values<float>(want, l + "residual")) < 1e-4);
            BOOST_TEST(max_relative_error(mlp_input, values<float>(want, l + "mlp_input")) < 1e-4);
            Routing routing;
            decoder->mlp(mlp_input, x, {}, &routing);
            BOOST_TEST(max_relative_error(x, values<float>(want, l + "output")) < 1e-4);
            if (!want.find(l + "experts")) {  // a dense layer
                BOOST_TEST(routing.experts.empty());
                continue;
            }
            std::vector<std::int32_t> chosen(routing.experts.begin(), routing.experts.end());
            BOOST_TEST(chosen == values<std::int32_t>(want, l + "experts"), boost::test_tools::per_element());
            BOOST_TEST(max_relative_error(routing.weights, values<float>(want, l + "weights")) < 1e-5);
        }
    }
    // The final norm and head on the reference's last output (so only they are under test).
    BOOST_TEST_CONTEXT(family << " logits") {
        BOOST_REQUIRE(want.find("logits"));
        const std::vector<float> last = values<float>(want, "layer" + std::to_string(layers - 1) + ".output");
        BOOST_TEST(max_relative_error(forward->logits(last), values<float>(want, "logits")) < 1e-4);
    }
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

// DeepSeek-V3.2: V3's forward on a checkpoint with indexer tensors, samples within index_topk.
BOOST_AUTO_TEST_CASE(deepseek_v32_layers_match_the_reference) { check_family("deepseek_v32", "fp8"); }

// MiniMax-M2: q/k RMSNorm over the whole projection, rotary on rotary_dim of head_dim, the F32
// sigmoid router with its bias beside the gate, FP8 weights as released.
BOOST_AUTO_TEST_CASE(minimax_m2_fp8_layers_match_the_reference) { check_family("minimax_m2", "fp8"); }

// Qwen3.5-MoE: Qwen3-Next's layers with the split in_proj_qkv / z / b / a projections, rope from
// rope_parameters, the always-renormalized router, experts fused in layout A (synth's BF16 default).
BOOST_AUTO_TEST_CASE(qwen3_5_moe_fused_layers_match_the_reference) { check_family("qwen3_5_moe"); }

// GLM-5: V3.2's MLA with v_head_dim != qk_nope_head_dim, rope_parameters' theta without YaRN,
// one expert group, mlp_layer_types; a "shared" indexer layer (no indexer tensors).
BOOST_AUTO_TEST_CASE(glm_moe_dsa_layers_match_the_reference) { check_family("glm_moe_dsa"); }

// GLM-5-FP8: the same forward on block-128 FP8 weights dequantized on the fly.
BOOST_AUTO_TEST_CASE(glm_moe_dsa_fp8_layers_match_the_reference) { check_family("glm_moe_dsa", "fp8", "tiny", "glm_moe_dsa_fp8"); }

BOOST_AUTO_TEST_SUITE_END()
