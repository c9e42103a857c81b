// kt-kernel's integer arithmetic (kt_arithmetic.hpp, emulated from its source) on moequant's
// outputs: what CI can check of the runtime's contract, where kt itself cannot be built.
// - The emulated product is exact but for the lowest code, whose sign it gets wrong: a planted
//   -128 / -8 byte, and a RAWINT4 code -8, show it (the emulation can fail).
// - Plain AMX outputs compute as kt's own quantization of the same weights, bit for bit.
// - On held-out activations, calibrated AMX INT4 and INT8 outputs have less error under kt's
//   arithmetic than plain ones, on every layer of two families; `gptq --for kt-rawint4` is
//   computed as the GPU computes it by RAWINT4's amx and avxvnni backends, a plain W4A16
//   group-32 output only by avxvnni, and verify says so.
// - Calibrated MOE_INT8 codes multiply exactly under AOCL's biased int8 GEMM: its int32 results
//   are the integer products of the codes dequantize() decodes.

#define BOOST_TEST_MODULE moequant kt-kernel arithmetic
#include <boost/test/unit_test.hpp>

#include "amx_layout.hpp"
#include "aocl_int8_layout.hpp"
#include "kt_arithmetic.hpp"
#include "test_support.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/engine/verification.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/layer_ops.hpp>

#include <boost/json.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <random>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

const Registry& plugins() {
    static const std::unique_ptr<Registry> registry = [] {
        auto r = std::make_unique<Registry>();
        r->load_directory(fs::path(MOEQUANT_PLUGIN_BUILD_DIR), PluginOrigin::plugin_dir);
        return r;
    }();
    return *registry;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
        norm += static_cast<double>(want[i]) * want[i];
    }
    return std::sqrt(diff / norm);
}

QuantizedTensor amx_parts(const std::vector<std::uint8_t>& codes, const std::vector<std::uint8_t>& scales) {
    QuantizedTensor q;
    Tensor c(DType::I8, {static_cast<std::int64_t>(codes.size())});
    std::memcpy(c.data(), codes.data(), codes.size());
    Tensor s(DType::F32, {static_cast<std::int64_t>(scales.size() / 4)});
    std::memcpy(s.data(), scales.data(), scales.size());
    q.parts.emplace_back("weight", std::move(c));
    q.parts.emplace_back("scale", std::move(s));
    return q;
}

// A model synthesized with trained statistics, its held-out MoE inputs recorded on text the
// calibration never sees (paragraphs of a Debian license; calibration runs on the embedded text).
struct Model {
    TempDir dir;
    fs::path folder;
    std::optional<Checkpoint> source;
    ModelPlan plan;
    std::optional<CalibrationActivations> held_out;

    Model(const std::string& family, const std::string& dtype) : folder(dir / "model") {
        auto synth = run_moequant({"synth", "--family", family, "--dtype", dtype, "--statistics", "trained", "--preset", "tiny",
                                   "--out", folder.string()});
        BOOST_REQUIRE_MESSAGE(synth.exit_code == 0, synth.err);
        const fs::path text = dir / "held_out.jsonl";
        write_held_out_text(text);
        auto record = run_moequant({"record", "--model_id", folder.string(), "--dataset", text.string(), "--num_calibration_samples",
                                    "8", "--max_sequence_length", "80", "-o", (dir / "acts.safetensors").string(), "-q"});
        BOOST_REQUIRE_MESSAGE(record.exit_code == 0, record.err);
        held_out.emplace(CalibrationActivations::open(dir / "acts.safetensors"));
        source.emplace(Checkpoint::open(folder));
        attach_encodings(*source, plugins());
        const ModelAdapter* adapter = plugins().adapter(family);
        BOOST_REQUIRE(adapter);
        plan = adapter->plan(source->config(), *source);
    }

    static void write_held_out_text(const fs::path& file) {
        const std::string license = read_text("/usr/share/common-licenses/GPL-3");
        std::ofstream out(file);
        std::size_t at = 0, rows = 0;
        while (rows < 8 && at < license.size()) {
            std::size_t end = license.find("\n\n", at);
            if (end == std::string::npos) end = license.size();
            std::string paragraph = license.substr(at, end - at);
            at = end + 2;
            if (paragraph.size() < 300) continue;
            for (char& c : paragraph)
                if (c == '\n' || c == '"' || c == '\\') c = ' ';
            out << "{\"text\": \"" << paragraph << "\"}\n";
            ++rows;
        }
    }

    fs::path run(const std::string& name, std::vector<std::string> args) const {
        const fs::path out = dir / name;
        args.insert(args.end(), {"-o", out.string(), "-q"});
        auto r = run_moequant(args);
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return out;
    }
    fs::path convert(const std::string& name, std::vector<std::string> extra) const {
        extra.insert(extra.begin(), {"convert", "-i", folder.string()});
        return run(name, extra);
    }
    fs::path gptq(const std::string& name, std::vector<std::string> extra) const {
        extra.insert(extra.begin(), {"gptq", "--model_id", folder.string(), "--dataset", "embedded"});
        return run(name, extra);
    }
};

// A layer's held-out tokens (BF16-exact), their routing and the source model's FP32 MoE output.
struct LayerCase {
    std::vector<float> x, reference;
    std::int64_t tokens = 0;
    Routing routing;
};

// The FP32 routed-expert output of `expert(e)`'s weights on the layer's held-out tokens.
LayerCase routed_layer(const Model& m, const MoeLayerPlan& layer,
                       const std::function<ExpertWeightsF32(std::int64_t)>& expert) {
    LayerCase c;
    const TensorView inputs = m.held_out->layer_inputs(layer.layer);
    c.tokens = inputs.shape[0];
    c.x.resize(inputs.elements());
    decode_to_f32(inputs, c.x);
    for (float& v : c.x) v = bf16_to_f32(f32_to_bf16(v));  // kt's input is BF16
    const std::vector<float> router = load_f32(*m.source, layer.router_weight);
    const std::vector<float> bias = layer.router_bias.empty() ? std::vector<float>{} : load_f32(*m.source, layer.router_bias);
    c.reference.assign(c.x.size(), 0.0f);
    c.routing = add_routed_experts(c.x, c.tokens, m.plan.hidden_size, m.plan.router, router, bias, m.plan.num_experts, expert,
                                   c.reference);
    return c;
}

ExpertWeightsF32 source_expert(const Model& m, const MoeLayerPlan& layer, std::int64_t e) {
    auto load = [&](Projection p) {
        const Tensor t = load_expert_matrix(*m.source, layer.experts[e].weights[static_cast<int>(p)]);
        std::vector<float> values(t.elements());
        decode_to_f32(t.view(), values);
        return values;
    };
    return {load(Projection::gate), load(Projection::up), load(Projection::down), m.plan.expert_intermediate_size};
}

// An output's experts as kt's kernels hold them, and as the GPU computes them (dequantized).
class OutputExperts {
public:
    OutputExperts(const Model& m, const fs::path& folder) : m_(m), output_(open_converted_output(plugins(), folder)) {
        quantizer_ = output_quantizer(plugins(), *output_.reader, "");
        const Options recorded = output_.reader->recorded();
        method_ = recorded.get_string("method", "");
        parts_ = static_cast<int>(recorded.get_int("parts", 1));
    }

    const kt::KernelExpert& kernel_expert(std::int64_t layer, std::int64_t e) {
        auto [at, fresh] = kernels_.try_emplace({layer, e});
        if (!fresh) return at->second;
        const std::int64_t hidden = m_.plan.hidden_size, inter = m_.plan.expert_intermediate_size;
        for (int part = 0; part < parts_; ++part)
            for (Projection p : expert_projections) {
                const bool down = p == Projection::down;
                const std::int64_t rows = down ? hidden : inter / parts_, cols = down ? inter / parts_ : hidden;
                const QuantizedTensor q = output_.reader->read({layer, e, p, part}).tensor;
                kt::KernelWeights w = method_ == "W4A16" ? kt::rawint4_weights(q, rows, cols)
                                                         : kt::amx_weights(q, method_ == "AMXINT4", rows, cols);
                (p == Projection::gate ? at->second.gate : p == Projection::up ? at->second.up : at->second.down).push_back(std::move(w));
            }
        return at->second;
    }

    ExpertWeightsF32 dequantized(std::int64_t layer, std::int64_t e) const {
        auto load = [&](Projection p) {
            const ExpertWeightSource& s = m_.plan.moe_layer(layer)->experts[e].weights[static_cast<int>(p)];
            const Tensor t = quantizer_->dequantize(output_.reader->read({layer, e, p, 0}).tensor, {s.rows, s.cols});
            return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.elements());
        };
        return {load(Projection::gate), load(Projection::up), load(Projection::down), m_.plan.expert_intermediate_size};
    }

    // kt's output on the layer's tokens, as routed by the source's router.
    std::vector<float> kt_output(const LayerCase& c, std::int64_t layer, kt::Linear linear = kt::kt_linear) {
        return kt::moe_forward(
            c.x, c.tokens, m_.plan.hidden_size, c.routing,
            [&](std::int64_t e) -> const kt::KernelExpert& { return kernel_expert(layer, e); }, linear);
    }

private:
    const Model& m_;
    OpenedOutput output_;
    std::shared_ptr<const Quantizer> quantizer_;
    std::string method_;
    int parts_ = 1;
    std::map<std::pair<std::int64_t, std::int64_t>, kt::KernelExpert> kernels_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(kt_arithmetic)

BOOST_AUTO_TEST_CASE(the_emulated_product_is_exact_but_for_the_lowest_code) {
    int wrong = 0;
    for (int a = -127; a <= 127; ++a)  // kt's activation codes: |a| <= 127
        for (int w = -128; w <= 127; ++w) {
            const std::int32_t got = kt::signed_byte_product(static_cast<std::int8_t>(a), static_cast<std::int8_t>(w));
            if (w == -128 && a < 0) {
                BOOST_TEST(got == -a * w);  // the sign flips: -(-128) wraps to -128
                ++wrong;
            } else if (got != a * w) {
                BOOST_TEST(got == a * w, a << " x " << w);
            }
        }
    BOOST_TEST(wrong == 127);
}

BOOST_AUTO_TEST_CASE(a_planted_lowest_code_multiplies_with_the_wrong_sign) {
    // One AMX row group (32 rows x 128 columns), all codes 0 but one, and an activation row that
    // is negative at that column only: kt's product is code * scale * activation exactly,
    // except for the lowest code.
    for (const bool int4 : {false, true}) {
        const amx::Method method = int4 ? amx::Method::int4 : amx::Method::int8;
        const std::int64_t n = 32, k = 128, column = 77;
        for (const int code : {int4 ? -7 : -127, int4 ? -8 : -128}) {
            BOOST_TEST_CONTEXT((int4 ? "INT4" : "INT8") << " code " << code) {
                std::vector<std::int8_t> codes(n * k, 0);
                codes[5 * k + column] = static_cast<std::int8_t>(code);
                std::vector<std::uint8_t> packed(amx::code_bytes(method, n, k));
                amx::pack_codes(method, n, k, codes.data(), packed.data());
                std::vector<std::uint8_t> scales(4 * n);
                const float d = 0.01f;
                for (std::int64_t r = 0; r < n; ++r) std::memcpy(scales.data() + 4 * r, &d, 4);
                const kt::KernelWeights w = kt::amx_weights(amx_parts(packed, scales), int4, n, k);
                std::vector<float> x(k, 0.0f);
                x[column] = -1.0f;
                const float got = kt::kt_linear(x, 1, w)[5];
                const float exact = static_cast<float>(code) * (int4 ? 16 : 1) * d * x[column];  // positive
                BOOST_TEST(exact > 0.0f);
                if (code == (int4 ? -8 : -128))
                    BOOST_TEST(got == -exact, boost::test_tools::tolerance(1e-5f));
                else
                    BOOST_TEST(got == exact, boost::test_tools::tolerance(1e-5f));
            }
        }
    }
    // RAWINT4: compressed-tensors stores code + 8; nibble 0 is code -8.
    QuantizedTensor q;
    Tensor packed(DType::I32, {32, 4});  // [rows, cols / 8]
    std::memset(packed.data(), 0x88, packed.size_bytes());  // code 0 everywhere
    packed.data_as<std::uint8_t>()[3] = 0x08;                // row 0, column 7 (high nibble): code -8
    Tensor scale(DType::BF16, {32, 1});
    for (std::int64_t i = 0; i < 32; ++i) scale.data_as<std::uint16_t>()[i] = f32_to_bf16(0.5f);
    q.parts.emplace_back("weight_packed", std::move(packed));
    q.parts.emplace_back("weight_scale", std::move(scale));
    const kt::KernelWeights w = kt::rawint4_weights(q, 32, 32);
    std::vector<float> x(32, 0.0f);
    x[7] = -2.0f;
    BOOST_TEST(kt::kt_linear(x, 1, w)[0] == -8.0f, boost::test_tools::tolerance(1e-5f));  // exact: (-8 * 0.5) * -2 = +8
}

BOOST_AUTO_TEST_CASE(plain_outputs_compute_as_kts_own_quantization_bit_for_bit) {
    const Quantizer* int4 = plugins().quantizer("amx-int4");
    const Quantizer* int8 = plugins().quantizer("amx-int8");
    BOOST_REQUIRE(int4 && int8);
    const json::value manifest = json::parse(read_text(golden_dir() / "kt-amx/manifest.json"));
    int cases = 0;
    std::mt19937_64 rng(35);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const auto& entry : manifest.at("cases").as_array()) {
        const json::object& c = entry.as_object();
        if (c.at("kind") != "matrix") continue;
        const std::int64_t n = c.at("n").to_number<std::int64_t>(), k = c.at("k").to_number<std::int64_t>();
        const std::vector<std::uint8_t> input = read_bytes(golden_dir() / "kt-amx" / c.at("input").at("path").as_string().c_str());
        const TensorView weight{DType::BF16, {n, k}, std::as_bytes(std::span(input))};
        std::vector<float> x(4 * k);
        for (float& v : x) v = bf16_to_f32(f32_to_bf16(normal(rng)));
        for (const bool is_int4 : {true, false}) {
            BOOST_TEST_CONTEXT(c.at("name").as_string() << (is_int4 ? " int4" : " int8")) {
                const json::object& out = c.at("outputs").at(is_int4 ? "int4" : "int8").as_object();
                const QuantizedTensor kts = amx_parts(read_bytes(golden_dir() / "kt-amx" / out.at("weight").at("path").as_string().c_str()),
                                                      read_bytes(golden_dir() / "kt-amx" / out.at("scale").at("path").as_string().c_str()));
                const QuantizedTensor ours = (is_int4 ? int4 : int8)->quantize(weight);
                const std::vector<float> y_kt = kt::kt_linear(x, 4, kt::amx_weights(kts, is_int4, n, k));
                const std::vector<float> y_ours = kt::kt_linear(x, 4, kt::amx_weights(ours, is_int4, n, k));
                BOOST_TEST(std::memcmp(y_kt.data(), y_ours.data(), 4 * y_kt.size()) == 0);
                // ... and the emulation computes the product of the values the codes stand for,
                // but for the rounding of the activations to 8 bits.
                const Tensor w = (is_int4 ? int4 : int8)->dequantize(kts, {n, k});
                const std::vector<float> exact = linear(x, 4, std::vector<float>(w.data_as<float>(), w.data_as<float>() + n * k), n, k);
                BOOST_TEST_MESSAGE(c.at("name").as_string() << (is_int4 ? " int4" : " int8") << ": " << relative_error(y_kt, exact));
                BOOST_TEST(relative_error(y_kt, exact) < 0.03);
                ++cases;
            }
        }
    }
    BOOST_TEST(cases >= 8);
}

BOOST_AUTO_TEST_CASE(calibrated_amx_beats_plain_under_kts_arithmetic_on_every_layer) {
    for (const auto& [family, dtype] : {std::pair{"qwen3_moe", "bf16"}, std::pair{"deepseek_v3", "fp8"}}) {
        const Model m(family, dtype);
        for (const char* method : {"int4", "int8"}) {
            const fs::path plain = m.convert(std::string("plain-") + method, {"--quant-method", method});
            const fs::path calibrated = m.convert(std::string("cal-") + method, {"--quant-method", method, "--calibrate", "--dataset", "embedded"});
            OutputExperts plain_experts(m, plain), calibrated_experts(m, calibrated);
            for (const MoeLayerPlan& layer : m.plan.moe_layers) {
                BOOST_TEST_CONTEXT(family << " " << method << " layer " << layer.layer) {
                    const LayerCase c = routed_layer(m, layer, [&](std::int64_t e) { return source_expert(m, layer, e); });
                    const double plain_error = relative_error(plain_experts.kt_output(c, layer.layer), c.reference);
                    const double calibrated_error = relative_error(calibrated_experts.kt_output(c, layer.layer), c.reference);
                    BOOST_TEST_MESSAGE(family << " " << method << " layer " << layer.layer << ": kt error plain " << plain_error
                                              << ", calibrated " << calibrated_error << " (" << calibrated_error / plain_error << "x)");
                    BOOST_TEST(calibrated_error < plain_error);
                }
            }
        }
    }
}

// MOE_INT8's integer product (AOCL's biased s8s8s32 GEMM with the column-sum compensation) is
// exact for any code, so the runtime computes what dequantize() says the calibrated codes are:
// on every matrix of two experts, AOCL's int32 results equal the integer products of the
// activation codes with the codes dequantize() decodes, all in -127..127. A column sum one off
// moves every product of its row: the emulation reads them.
BOOST_AUTO_TEST_CASE(calibrated_moe_int8_codes_compute_as_dequantize_says_under_aocls_arithmetic) {
    const Model m("qwen3_moe", "bf16");
    const fs::path calibrated = m.convert("cal-moe-int8", {"--quant-method", "moe_int8", "--calibrate", "--dataset", "embedded",
                                                           "--threadpool-count", "1"});
    const OpenedOutput output = open_converted_output(plugins(), calibrated);
    const std::shared_ptr<const Quantizer> quantizer = output_quantizer(plugins(), *output.reader, "");
    BOOST_REQUIRE(quantizer);
    BOOST_TEST(quantizer->id() == "moe-int8-gptq");
    const MoeLayerPlan& layer = m.plan.moe_layers.front();
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::size_t matrices = 0;
    for (std::int64_t e = 0; e < 2; ++e)
        for (const Projection p : expert_projections) {
            BOOST_TEST_CONTEXT("expert " << e << " projection " << static_cast<int>(p)) {
                const ExpertWeightSource& s = layer.experts[e].weights[static_cast<int>(p)];
                const QuantizedTensor q = output.reader->read({layer.layer, e, p, 0}).tensor;
                const Tensor decoded = quantizer->quantizer_for({layer.layer, p}).dequantize(q, {s.rows, s.cols});
                kt::AoclWeights w = kt::aocl_weights(q, s.rows, s.cols, p == Projection::down ? 64 : 32);
                const std::int64_t tokens = 4;
                std::vector<float> x(static_cast<std::size_t>(tokens * s.cols));
                for (float& v : x) v = bf16_to_f32(f32_to_bf16(normal(rng)));
                const kt::QuantizedActivations a = kt::moe_int8_activations(x.data(), tokens, s.cols);
                const std::vector<std::int32_t> sums = kt::aocl_integer_product(a, w);
                std::int64_t wrong = 0, out_of_range = 0;
                for (std::int64_t r = 0; r < s.rows; ++r) {
                    std::vector<std::int64_t> codes(static_cast<std::size_t>(s.cols), 0);
                    for (std::int64_t c = 0; c < s.cols; ++c)
                        if (w.scales[r] != 0) {
                            const float code = decoded.data_as<float>()[r * s.cols + c] / w.scales[r];  // q up to rounding
                            codes[c] = static_cast<std::int64_t>(std::nearbyint(code));
                            out_of_range += std::fabs(code - static_cast<float>(codes[c])) > 1e-3f || std::abs(codes[c]) > 127;
                        }
                    for (std::int64_t t = 0; t < tokens; ++t) {
                        std::int64_t exact = 0;
                        for (std::int64_t c = 0; c < s.cols; ++c) exact += a.codes[t * s.cols + c] * codes[c];
                        wrong += sums[t * s.rows + r] != exact;
                    }
                }
                BOOST_TEST(out_of_range == 0);
                BOOST_TEST(wrong == 0);
                // Row 0's column sum one unit (128) off: each of its products moves by 128.
                std::uint8_t* colsum = w.blocks.data() + moe_int::aocl_colsum_offset(w.block_rows, s.cols, 0);
                std::int32_t value;
                std::memcpy(&value, colsum, 4);
                value += 128;
                std::memcpy(colsum, &value, 4);
                const std::vector<std::int32_t> tampered = kt::aocl_integer_product(a, w);
                for (std::int64_t t = 0; t < tokens; ++t) BOOST_TEST(tampered[t * s.rows] == sums[t * s.rows] - 128);
                ++matrices;
            }
        }
    BOOST_TEST(matrices == 6u);
}

BOOST_AUTO_TEST_CASE(gptq_for_kt_rawint4_computes_as_the_gpu_does_and_plain_group_32_does_not) {
    const Model m("qwen3_moe", "bf16");
    const fs::path for_kt = m.gptq("for-kt", {"--for", "kt-rawint4"});
    const fs::path plain = m.gptq("plain-g32", {"--quant_type", "W4A16", "--group_size", "32"});
    for (const auto& [folder, correct] : {std::pair{for_kt, true}, std::pair{plain, false}}) {
        OutputExperts experts(m, folder);
        for (const MoeLayerPlan& layer : m.plan.moe_layers) {
            BOOST_TEST_CONTEXT(folder.filename() << " layer " << layer.layer) {
                // What SGLang's GPU experts compute: the dequantized weights in float.
                const LayerCase c = routed_layer(m, layer, [&](std::int64_t e) { return experts.dequantized(layer.layer, e); });
                const double error = relative_error(experts.kt_output(c, layer.layer), c.reference);
                BOOST_TEST_MESSAGE(folder.filename() << " layer " << layer.layer << ": kt RAWINT4 (amx) error against the GPU's " << error);
                if (correct) BOOST_TEST(error < 0.03);
                else BOOST_TEST(error > 0.2);
                // The avxvnni backend multiplies every code exactly, -8 too.
                const double vnni = relative_error(experts.kt_output(c, layer.layer, kt::avxvnni_linear), c.reference);
                BOOST_TEST_MESSAGE(folder.filename() << " layer " << layer.layer << ": kt RAWINT4 (avxvnni) error " << vnni);
                BOOST_TEST(vnni < 0.03);
            }
        }
        auto v = run_moequant({"verify", "--source", m.folder.string(), "--converted", folder.string(), "--for", "kt-rawint4"});
        BOOST_TEST(v.exit_code == (correct ? 0 : 6), v.out + v.err);
        if (!correct) BOOST_TEST(v.out.find("Int4Range") != std::string::npos, v.out);
    }
}

BOOST_AUTO_TEST_SUITE_END()
