// Every source encoding end to end: a checkpoint synth writes in the encoding converts to kt
// tensors byte-identical to those of its BF16 twin (the same checkpoint with every encoded
// weight replaced by the values the spec's formula gives, computed here); verify passes against
// the encoded source; gptq and the BF16 export read it and write what they write from the twin.

#include "checkpoint_rewrite.hpp"
#include "reference_numerics.hpp"
#include "tensor_bytes.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/engine/plugin_registry.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

struct EncodedCase {
    std::string family, dtype;
    std::string encoding;  // the encoding the routed experts must be recognised as
    std::string max_sequence_length = {};  // for gptq --dataset, where the family limits it (DeepSeek-V3.2)
    bool forward = true;   // the family has a calibration forward (else GPTQ runs as RTN)
    std::string others = {};  // the other encoded linears' encoding when it differs (DeepSeek-V4: fp8)
};

float stored_float(const TensorView& v, std::size_t i) {
    switch (v.dtype) {
        case DType::BF16: return bf16_value(element<std::uint16_t>(v, i));
        case DType::F16: return f16_value(element<std::uint16_t>(v, i));
        case DType::F8_E8M0: return e8m0(element<std::uint8_t>(v, i));
        case DType::F32: return element<float>(v, i);
        default: BOOST_FAIL("unexpected scale dtype " << dtype_name(v.dtype)); return 0;
    }
}

// FP8 E4M3 x its scale (block 128 x 128, per channel or per tensor, told apart by the scale's
// element count), then nearest-even BF16.
std::vector<std::uint16_t> reference_fp8(const TensorView& w, const TensorView& s) {
    const std::int64_t rows = w.shape[0], cols = w.shape[1];
    const std::uint64_t scales = s.elements();
    std::vector<std::uint16_t> out(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            std::size_t si = 0;
            if (scales == static_cast<std::uint64_t>(rows)) si = static_cast<std::size_t>(r);
            else if (scales > 1) si = static_cast<std::size_t>((r / 128) * ((cols + 127) / 128) + c / 128);
            const auto i = static_cast<std::size_t>(r * cols + c);
            out[i] = bf16_round(e4m3(element<std::uint8_t>(w, i)) * stored_float(s, si));
        }
    return out;
}

// compressed-tensors pack-quantized INT4: (nibble - 8) x scale of its group of 32 along K.
std::vector<std::uint16_t> reference_int4(const TensorView& packed, const TensorView& s) {
    const std::int64_t rows = packed.shape[0], cols = packed.shape[1] * 8, groups = s.shape[1];
    std::vector<std::uint16_t> out(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            const auto byte = element<std::uint8_t>(packed, static_cast<std::size_t>((r * cols + c) / 2));
            const int code = (c % 2 == 0 ? byte & 0xF : byte >> 4) - 8;
            const float scale = stored_float(s, static_cast<std::size_t>(r * groups + c * groups / cols));
            out[static_cast<std::size_t>(r * cols + c)] = bf16_round(static_cast<float>(code) * scale);
        }
    return out;
}

// MXFP4 as DeepSeek-V4 stores it: E2M1 code (low nibble = even column) x 2^(e - 127) of its
// block of 32 along K.
std::vector<std::uint16_t> reference_mxfp4(const TensorView& packed, const TensorView& s) {
    static constexpr float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    const std::int64_t rows = packed.shape[0], cols = packed.shape[1] * 2;
    std::vector<std::uint16_t> out(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            const auto byte = element<std::uint8_t>(packed, static_cast<std::size_t>((r * cols + c) / 2));
            const float scale = e8m0(element<std::uint8_t>(s, static_cast<std::size_t>(r * (cols / 32) + c / 32)));
            out[static_cast<std::size_t>(r * cols + c)] = bf16_round(e2m1[c % 2 == 0 ? byte & 0xF : byte >> 4] * scale);
        }
    return out;
}

// MXFP8 as MiniMax-M3 stores it: E4M3 code x 2^(e - 127) of its block of 32 along K.
std::vector<std::uint16_t> reference_mxfp8(const TensorView& codes, const TensorView& s) {
    const std::int64_t rows = codes.shape[0], cols = codes.shape[1];
    std::vector<std::uint16_t> out(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            const float scale = e8m0(element<std::uint8_t>(s, static_cast<std::size_t>(r * (cols / 32) + c / 32)));
            out[static_cast<std::size_t>(r * cols + c)] = bf16_round(e4m3(element<std::uint8_t>(codes, static_cast<std::size_t>(r * cols + c))) * scale);
        }
    return out;
}

// AutoGPTQ v1: w[n][k] = s[g(k)][n] x (q[k][n] - (z[g(k)][n] + 1)), q packed along K, z along N.
std::vector<std::uint16_t> reference_gptq(const TensorView& qweight, const TensorView& qzeros, const TensorView& scales,
                                          const TensorView& g_idx) {
    const std::int64_t k = qweight.shape[0] * 8, n = qweight.shape[1];
    std::vector<std::uint16_t> out(static_cast<std::size_t>(n * k));
    for (std::int64_t row = 0; row < n; ++row)
        for (std::int64_t col = 0; col < k; ++col) {
            const auto g = element<std::int32_t>(g_idx, static_cast<std::size_t>(col));
            const auto word = element<std::uint32_t>(qweight, static_cast<std::size_t>((col / 8) * n + row));
            const auto zeros = element<std::uint32_t>(qzeros, static_cast<std::size_t>(g * (n / 8) + row / 8));
            const int q = static_cast<int>((word >> (4 * (col % 8))) & 0xF);
            const int z = static_cast<int>((zeros >> (4 * (row % 8))) & 0xF) + 1;
            const float s = stored_float(scales, static_cast<std::size_t>(g * n + row));
            out[static_cast<std::size_t>(row * k + col)] = bf16_round(s * static_cast<float>(q - z));
        }
    return out;
}

// AutoAWQ GEMM: w[n][k] = s[k/32][n] x (q[k][n] - z[k/32][n]), q and z packed along N, nibble p of a
// word holding column 8j + [0,2,4,6,1,3,5,7][p] (the synthesized group is 32).
std::vector<std::uint16_t> reference_awq(const TensorView& qweight, const TensorView& qzeros, const TensorView& scales) {
    const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    const std::int64_t k = qweight.shape[0], n = qweight.shape[1] * 8, group = 32;
    std::vector<std::uint16_t> out(static_cast<std::size_t>(n * k));
    auto nibble = [&](const TensorView& words, std::int64_t row, std::int64_t col) {
        const auto word = element<std::uint32_t>(words, static_cast<std::size_t>(row * (n / 8) + col / 8));
        for (int p = 0; p < 8; ++p)
            if (order[p] == col % 8) return static_cast<int>((word >> (4 * p)) & 0xF);
        return -1;
    };
    for (std::int64_t row = 0; row < n; ++row)
        for (std::int64_t col = 0; col < k; ++col) {
            const float s = stored_float(scales, static_cast<std::size_t>((col / group) * n + row));
            out[static_cast<std::size_t>(row * k + col)] = bf16_round(s * static_cast<float>(nibble(qweight, col, row) - nibble(qzeros, col / group, row)));
        }
    return out;
}

const Registry& encodings() {
    static Registry* r = [] {
        auto* registry = new Registry;
        registry->load_directory(fs::path(MOEQUANT_PLUGIN_BUILD_DIR), PluginOrigin::plugin_dir);
        return registry;
    }();
    return *r;
}

// The twin: each encoded weight written as BF16 under its weight name from the reference
// formula, its other tensors dropped, quantization_config removed.
void write_bf16_twin(const fs::path& encoded, const fs::path& twin, const EncodedCase& c) {
    Checkpoint source = Checkpoint::open(encoded);
    attach_encodings(source, encodings());
    std::size_t replaced = 0;
    rewrite(encoded, twin, [&](const std::string& name, std::optional<Replacement>& r) {
        const EncodedWeight* w = source.weight_holding(name);
        if (!w || w->input_type == "bf16" || w->input_type == "fp32") return true;
        if (name != w->primary()) return false;
        const bool routed = name.find(".experts.") != std::string::npos;
        BOOST_TEST(w->encoding == (routed || c.others.empty() ? c.encoding : c.others), name);
        std::vector<std::uint16_t> values;
        if (w->encoding == "fp8") values = reference_fp8(source.view(name), source.view(w->tensor("scale")));
        else if (w->encoding == "ct-pack") values = reference_int4(source.view(name), source.view(w->tensor("scale")));
        else if (w->encoding == "mxfp4") values = reference_mxfp4(source.view(name), source.view(w->tensor("scale")));
        else if (w->encoding == "mxfp8") values = reference_mxfp8(source.view(name), source.view(w->tensor("scale")));
        else if (w->encoding == "gptq")
            values = reference_gptq(source.view(name), source.view(w->tensor("zeros")), source.view(w->tensor("scale")),
                                    source.view(w->tensor("g_idx")));
        else if (w->encoding == "awq")
            values = reference_awq(source.view(name), source.view(w->tensor("zeros")), source.view(w->tensor("scale")));
        else BOOST_FAIL("no reference decoder for encoding " << w->encoding);
        r = Replacement{{w->name, DType::BF16, w->shape}, std::vector<std::uint8_t>(values.size() * 2)};
        std::memcpy(r->bytes.data(), values.data(), r->bytes.size());
        ++replaced;
        return true;
    }, [](json::object& config) {
        config.erase("quantization_config");
        if (auto* text = config.if_contains("text_config")) text->as_object().erase("quantization_config");  // Kimi-K2.5
    });
    BOOST_TEST(replaced > 0u);
}

// The tensors of two outputs' safetensors files whose names contain `only` (all when empty),
// by name: the same dtype, shape and bytes.
void expect_same_tensors(const fs::path& a, const fs::path& b, const std::string& only = {}) {
    Checkpoint ca = Checkpoint::open(a), cb = Checkpoint::open(b);
    if (only.empty()) BOOST_TEST(ca.tensor_names() == cb.tensor_names(), boost::test_tools::per_element());
    std::size_t compared = 0;
    for (const auto& name : ca.tensor_names()) {
        if (!cb.contains(name) || name.find(only) == std::string::npos) continue;
        ++compared;
        const TensorView x = ca.view(name), y = cb.view(name);
        BOOST_TEST((x.dtype == y.dtype && x.shape == y.shape), name);
        BOOST_TEST((x.size_bytes() == y.size_bytes() && std::memcmp(x.data(), y.data(), x.size_bytes()) == 0),
                   name << " differs between " << a << " and " << b);
    }
    BOOST_TEST(compared > 0u);
}

// Two .kt trees (--no-merge-safetensor): the same expert files, byte for byte.
void expect_same_kt_files(const fs::path& a, const fs::path& b) {
    auto kt_files = [](const fs::path& root) {
        auto hashes = file_hashes(root);
        std::erase_if(hashes, [](const auto& file) { return !file.first.ends_with(".kt"); });
        return hashes;
    };
    const auto x = kt_files(a), y = kt_files(b);
    BOOST_TEST(!x.empty());
    BOOST_TEST((x == y), a << " and " << b << " hold different .kt files");
}

void run_ok(const std::vector<std::string>& args) {
    auto r = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "moequant " << args.front() << ": " << r.err);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(encoded_sources)

BOOST_AUTO_TEST_CASE(encoded_checkpoints_convert_like_their_reference_decoded_bf16_twins) {
    const std::vector<EncodedCase> cases = {
        {"deepseek_v3", "fp8", "fp8"},
        {"glm4_moe", "fp8-channel", "fp8"},
        {"minimax_m2", "fp8", "fp8"},
        {"kimi_k2", "int4-ct", "ct-pack"},
        {"kimi_k25", "int4-ct", "ct-pack"},
        {"kimi_k26", "int4-ct", "ct-pack"},  // Kimi-K2.6's release: K2.5's INT4 g32 experts
        {"minimax_m27", "fp8", "fp8"},       // MiniMax-M2.7's release: M2's FP8 block experts
        {"deepseek_v32", "fp8", "fp8", "48"},
        {"deepseek_v3", "mxfp4", "mxfp4"},
        {"qwen3_moe", "gptq", "gptq"},
        {"qwen3_moe", "awq", "awq"},
        {"deepseek_v4", "mxfp4", "mxfp4", {}, false, "fp8"},  // the release: block-FP8 attention, shared experts
        {"qwen3_5_moe", "fp8", "fp8"},
        {"glm_moe_dsa", "fp8", "fp8", "48"},
        {"minimax_m3", "mxfp8", "mxfp8"},
    };
    for (const auto& c : cases) {
        BOOST_TEST_CONTEXT(c.family << " " << c.dtype) {
            TempDir dir;
            const fs::path encoded = dir / "encoded", twin = dir / "twin";
            run_ok({"synth", "--family", c.family, "--dtype", c.dtype, "--out", encoded.string()});
            write_bf16_twin(encoded, twin, c);
            auto inspected = run_moequant({"inspect", encoded.string()});
            BOOST_TEST(inspected.out.find("weights by encoding:") != std::string::npos);
            BOOST_TEST(inspected.out.find("  " + c.encoding + " ") != std::string::npos, inspected.out);

            // INT4 merged with 2 threadpool parts, INT8 as the .kt tree with 1: both methods, both
            // layouts and both part counts (the layouts' other combinations do not depend on the
            // source's encoding, and the convert suite runs them).
            for (const auto& [method, parts, tree] : {std::tuple{"int4", "2", false}, {"int8", "1", true}}) {
                BOOST_TEST_CONTEXT(method << " T=" << parts << (tree ? " tree" : " merged")) {
                    const std::string name = std::string(method) + parts + (tree ? "t" : "m");
                    const fs::path a = dir / ("kt-" + name), b = dir / ("kt-twin-" + name);
                    for (const auto& [in, out] : {std::pair{encoded, a}, {twin, b}}) {
                        std::vector<std::string> args{"convert", "-i", in.string(), "-o", out.string(), "--quant-method", method,
                                                      "--threadpool-count", parts, "--quiet"};
                        if (tree) args.push_back("--no-merge-safetensor");
                        run_ok(args);
                    }
                    // The routed experts' kt tensors; kt outputs copy the other tensors as stored.
                    if (tree) expect_same_kt_files(a, b);
                    else expect_same_tensors(a, b, "_exps.");
                    run_ok({"verify", "--source", encoded.string(), "--converted", a.string()});
                }
            }
            run_ok({"convert", "-i", encoded.string(), "-o", (dir / "bf16").string(), "--format", "bf16-safetensors", "--quiet"});
            run_ok({"convert", "-i", twin.string(), "-o", (dir / "bf16-twin").string(), "--format", "bf16-safetensors", "--quiet"});
            expect_same_tensors(dir / "bf16", dir / "bf16-twin");
            // GPTQ runs the calibration forward over the decoded non-expert weights too.
            std::vector<std::string> calibration =
                c.forward ? std::vector<std::string>{"--dataset", "embedded"} : std::vector<std::string>{"--quant_method", "RTN"};
            if (c.forward && !c.max_sequence_length.empty())
                calibration.insert(calibration.end(), {"--max_sequence_length", c.max_sequence_length});
            auto gptq = [&](const fs::path& in, const fs::path& out) {
                std::vector<std::string> args{"gptq", "--model_id", in.string(), "--output_dir", out.string(), "--quiet"};
                args.insert(args.end(), calibration.begin(), calibration.end());
                run_ok(args);
            };
            gptq(encoded, dir / "gptq");
            gptq(twin, dir / "gptq-twin");
            expect_same_tensors(dir / "gptq", dir / "gptq-twin");
        }
    }
}

BOOST_AUTO_TEST_CASE(input_type_is_checked_against_every_flavour) {
    TempDir dir;
    run_ok({"synth", "--family", "glm4_moe", "--dtype", "fp8-channel", "--out", (dir / "fp8").string()});
    run_ok({"synth", "--family", "kimi_k2", "--dtype", "int4-ct", "--out", (dir / "int4").string()});
    run_ok({"convert", "-i", (dir / "fp8").string(), "-o", (dir / "a").string(), "--input-type", "fp8", "--quiet"});
    run_ok({"convert", "-i", (dir / "int4").string(), "-o", (dir / "b").string(), "--input-type", "int4", "--quiet"});
    run_ok({"synth", "--family", "mixtral", "--dtype", "mxfp4", "--out", (dir / "mxfp4").string()});
    run_ok({"convert", "-i", (dir / "mxfp4").string(), "-o", (dir / "e").string(), "--input-type", "mxfp4", "--quiet"});
    auto wrong = run_moequant({"convert", "-i", (dir / "int4").string(), "-o", (dir / "c").string(), "--input-type", "fp8"});
    BOOST_TEST(wrong.exit_code == 3, wrong.err);
    BOOST_TEST(wrong.err.find("InputTypeMismatch") != std::string::npos, wrong.err);
    BOOST_TEST(wrong.err.find("compressed-tensors INT4") != std::string::npos, wrong.err);
    auto unknown = run_moequant({"convert", "-i", (dir / "int4").string(), "-o", (dir / "d").string(), "--input-type", "int3"});
    BOOST_TEST(unknown.exit_code == 2, unknown.err);
    BOOST_TEST(unknown.err.find("int4") != std::string::npos, unknown.err);
}

// What an encoding refuses stops convert before anything is written: exit 3, one line naming
// the tensor and the rule.
BOOST_AUTO_TEST_CASE(refused_encodings_stop_convert_with_one_line) {
    TempDir dir;
    const fs::path good = dir / "good";
    run_ok({"synth", "--family", "kimi_k2", "--dtype", "int4-ct", "--out", good.string()});
    const std::string expert = "model.layers.1.mlp.experts.3.up_proj.";
    auto expect_refusal = [&](const fs::path& model, const std::vector<std::string>& parts) {
        const fs::path out = dir / (model.filename().string() + "-out");
        auto r = run_moequant({"convert", "-i", model.string(), "-o", out.string()});
        BOOST_TEST(r.exit_code == 3, r.err);
        BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
        for (const auto& p : parts) BOOST_TEST(r.err.find(p) != std::string::npos, "missing '" << p << "' in: " << r.err);
        BOOST_TEST(!fs::exists(out));
    };
    rewrite(good, dir / "zero_point", [&](const std::string& name, std::optional<Replacement>& r) {
        if (name == expert + "weight_shape") r = Replacement{{expert + "weight_zero_point", DType::I32, {32, 1}}, std::vector<std::uint8_t>(128, 0)};
        return true;
    });
    expect_refusal(dir / "zero_point", {expert + "weight_zero_point", "UnsupportedEncoding"});
    rewrite_config(good, dir / "two_bits", [](json::object& c) {
        c["quantization_config"].as_object()["config_groups"].as_object()["group_0"].as_object()["weights"].as_object()["num_bits"] = 2;
    });
    expect_refusal(dir / "two_bits", {".weight_packed", "num_bits 2", "UnsupportedEncoding"});
    rewrite_config(good, dir / "no_config", [](json::object& c) { c.erase("quantization_config"); });
    expect_refusal(dir / "no_config", {".weight", "no installed encoding can decode", "weight_packed I32", "UnsupportedEncoding"});

    // Data refusals happen where the decode meets them (an MXFP4 NaN scale byte, a GPTQ group
    // index outside the scales): layers before it may be written, the output is left unfinished
    // (no index) for a rerun, and the error is one line.
    auto expect_data_refusal = [&](const fs::path& model, const std::vector<std::string>& parts) {
        const fs::path out = dir / (model.filename().string() + "-out");
        auto r = run_moequant({"convert", "-i", model.string(), "-o", out.string(), "--quiet"});
        BOOST_TEST(r.exit_code == 3, r.err);
        BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
        for (const auto& p : parts) BOOST_TEST(r.err.find(p) != std::string::npos, "missing '" << p << "' in: " << r.err);
        BOOST_TEST(!fs::exists(out / "model.safetensors.index.json"));
    };
    const fs::path mx = dir / "mxfp4_nan";
    run_ok({"synth", "--family", "deepseek_v3", "--dtype", "mxfp4", "--out", mx.string()});
    const std::string mx_scale = "model.layers.2.mlp.experts.1.down_proj.scale";
    edit_tensor_bytes(mx, mx_scale, [](std::uint8_t* bytes, std::size_t size) { bytes[size - 1] = 0xFF; });
    expect_data_refusal(mx, {mx_scale, "NaNScale", "row", "block"});
    const fs::path gq = dir / "gptq_g_idx";
    run_ok({"synth", "--family", "qwen3_moe", "--dtype", "gptq", "--out", gq.string()});
    const std::string g_idx = "model.layers.1.mlp.experts.2.gate_proj.g_idx";
    edit_tensor_bytes(gq, g_idx, [](std::uint8_t* bytes, std::size_t) { bytes[0] = 99; });
    expect_data_refusal(gq, {g_idx, "GroupIndexOutOfRange"});
}

BOOST_AUTO_TEST_SUITE_END()
