// `moequant convert` end to end: for every family, synth -> convert (INT4 and INT8, T = 1 and 2,
// merged safetensors and the .kt tree), and every expert's bytes compared with an independent
// quantization of the source done here, from the spec (kt-cpu-format.md §3-§7): the source
// matrix read from the family's tensor names (FP8 dequantized, fused tensors sliced), scales and
// codes computed per element, and placed with the §4.4 index formula.

#include "reference_numerics.hpp"
#include "synth_checkpoint.hpp"
#include "tensor_bytes.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

// ---- the source side, from the family rules ----

struct Family {
    std::string name, dtype, layout;
    std::string prefix = "model.layers.";
    std::string experts = "mlp.experts";
    std::array<std::string, 3> projections = {"gate_proj", "up_proj", "down_proj"};
};

// BF16 bits of expert `e`, projection p (0 gate, 1 up, 2 down) of layer `layer`: [rows, cols].
std::vector<std::uint16_t> source_matrix(const Checkpoint& c, const Family& f, std::int64_t layer, std::int64_t e, int p,
                                         std::int64_t I, std::int64_t H) {
    const std::int64_t rows = p == 2 ? H : I, cols = p == 2 ? I : H;
    std::vector<std::uint16_t> out(static_cast<std::size_t>(rows * cols));
    const std::string lp = f.prefix + std::to_string(layer) + ".";
    if (f.layout == "fused-linear" || f.layout == "fused-bmm") {
        const bool b = f.layout == "fused-bmm";
        TensorView t = c.view(lp + "mlp.experts." + (p == 2 ? "down_proj" : "gate_up_proj"));
        const std::int64_t a = t.shape[1], w = t.shape[2];
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t col = 0; col < cols; ++col) {
                // Layout A stores [out, in] (gate rows then up rows); B stores [in, out] (gate columns then up).
                std::int64_t sr = b ? col : r, sc = b ? r : col;
                if (p == 1) (b ? sc : sr) += I;
                out[static_cast<std::size_t>(r * cols + col)] = element<std::uint16_t>(t, static_cast<std::size_t>((e * a + sr) * w + sc));
            }
        return out;
    }
    const std::string name = lp + f.experts + "." + std::to_string(e) + "." + f.projections[static_cast<std::size_t>(p)] + ".weight";
    TensorView t = c.view(name);
    if (t.dtype == DType::BF16) {
        std::memcpy(out.data(), t.data(), out.size() * 2);
        return out;
    }
    TensorView s = c.view(name + "_scale_inv");
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t col = 0; col < cols; ++col) {
            const float scale = element<float>(s, static_cast<std::size_t>((r / 128) * s.shape[1] + col / 128));
            out[static_cast<std::size_t>(r * cols + col)] = bf16_round(e4m3(element<std::uint8_t>(t, static_cast<std::size_t>(r * cols + col))) * scale);
        }
    return out;
}

// ---- the kt-kernel side, from kt-cpu-format.md §3-§5 ----

struct Packed {
    std::vector<std::uint8_t> codes;
    std::vector<std::uint8_t> scales;  // little-endian float32
};

int saturate(float v) {
    if (!(std::fabs(v) < 2147483648.0f)) return -128;
    return std::clamp(static_cast<int>(std::nearbyint(v)), -128, 127);
}

Packed reference_pack(const std::vector<std::uint16_t>& m, std::int64_t n, std::int64_t k, bool int4) {
    const std::int64_t n_block = int4 ? 128 : 64, k_block = 3584, w = int4 ? 128 : 64;
    Packed out;
    out.codes.assign(static_cast<std::size_t>(int4 ? n * k / 2 : n * k), 0);
    out.scales.resize(static_cast<std::size_t>(4 * n));
    for (std::int64_t r = 0; r < n; ++r) {
        float amax = 0;
        for (std::int64_t c = 0; c < k; ++c)
            amax = std::max(amax, std::fabs(std::bit_cast<float>(static_cast<std::uint32_t>(m[static_cast<std::size_t>(r * k + c)]) << 16)));
        const float d = int4 ? static_cast<float>(static_cast<double>(amax) / 112.0) : amax * std::bit_cast<float>(0x3C010204u);
        const float inv = d != 0 ? 1.0f / d : 0.0f;
        std::memcpy(out.scales.data() + 4 * r, &d, 4);
        const std::int64_t nb = r / n_block * n_block, nbs = std::min(n_block, n - nb);
        const std::int64_t ns = (r - nb) / 32 * 32, i = r - nb - ns;
        for (std::int64_t c = 0; c < k; ++c) {
            const float x = std::bit_cast<float>(static_cast<std::uint32_t>(m[static_cast<std::size_t>(r * k + c)]) << 16);
            const int t = saturate(x * inv);
            const std::int64_t kb = c / k_block * k_block, kbs = std::min(k_block, k - kb), kt = (c - kb) / w * w,
                               j = c - kb - kt;
            const std::int64_t elements = nb * k + kb * nbs + ns * kbs + kt * 32;
            if (!int4) {
                const std::int64_t off = elements + (i / 16) * 1024 + (j / 4) * 64 + (i % 16) * 4 + j % 4;
                out.codes[static_cast<std::size_t>(off)] = static_cast<std::uint8_t>(static_cast<std::int8_t>(t));
            } else {
                const int a = std::abs(t), q = (t < 0 ? -1 : 1) * (((a + 8) & 0xF0) / 16);
                const std::int64_t jj = j % 64;
                const std::int64_t off = elements / 2 + (i / 16) * 1024 + (jj / 4) * 64 + (i % 16) * 4 + jj % 4;
                out.codes[static_cast<std::size_t>(off)] |= static_cast<std::uint8_t>((q & 0xF) << (j >= 64 ? 4 : 0));
            }
        }
    }
    return out;
}

// kt-kernel's MOE_INT8 from docs/kt-moe-int8.md: per row d = amax * fl32(1/127) and codes round(w / d)
// half away from zero (a row of zeros: codes 0); blocks of `nb` rows, each [roundup(k,4)/4][nb][4]
// codes then nb int32 column sums of 128 x the row's codes.
Packed reference_pack_moe_int8(const std::vector<std::uint16_t>& m, std::int64_t n, std::int64_t k, std::int64_t nb) {
    const std::int64_t padded = (k + 3) / 4 * 4, block = padded * nb + 4 * nb;
    Packed out;
    out.codes.assign(static_cast<std::size_t>(n / nb * block), 0);
    out.scales.resize(static_cast<std::size_t>(4 * n));
    for (std::int64_t r = 0; r < n; ++r) {
        auto value = [&](std::int64_t c) {
            return std::bit_cast<float>(static_cast<std::uint32_t>(m[static_cast<std::size_t>(r * k + c)]) << 16);
        };
        float amax = 0;
        for (std::int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(value(c)));
        const float d = amax * std::bit_cast<float>(0x3C010204u);  // amax / 127 as kt's -ffast-math build computes it
        std::memcpy(out.scales.data() + 4 * r, &d, 4);
        std::uint8_t* b = out.codes.data() + (r / nb) * block;
        std::int32_t sum = 0;
        for (std::int64_t c = 0; c < k; ++c) {
            const float q = std::round(value(c) / d);
            const int code = std::isnan(q) ? 0 : static_cast<int>(q);
            b[(c / 4) * nb * 4 + (r % nb) * 4 + c % 4] = static_cast<std::uint8_t>(static_cast<std::int8_t>(code));
            sum += code;
        }
        const std::int32_t colsum = sum * 128;
        std::memcpy(b + padded * nb + 4 * (r % nb), &colsum, 4);
    }
    return out;
}

// Part i of T: gate/up rows, down columns (§5).
std::vector<std::uint16_t> part_of(const std::vector<std::uint16_t>& m, std::int64_t rows, std::int64_t cols, int p, int i, int parts) {
    if (p != 2) {
        const std::int64_t each = rows / parts;
        return {m.begin() + i * each * cols, m.begin() + (i + 1) * each * cols};
    }
    const std::int64_t each = cols / parts;
    std::vector<std::uint16_t> out;
    for (std::int64_t r = 0; r < rows; ++r) out.insert(out.end(), m.begin() + r * cols + i * each, m.begin() + r * cols + (i + 1) * each);
    return out;
}

void synth(const fs::path& out, const Family& f) { synth_checkpoint(out, {f.name, f.dtype, f.layout}); }

void run_convert(const fs::path& in, const fs::path& out, const std::string& method, int parts, bool tree,
             std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"convert", "-i", in.string(), "-o", out.string(), "--quant-method", method,
                                     "--threadpool-count", std::to_string(parts), "--quiet"};
    if (tree) args.push_back("--no-merge-safetensor");
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
}

const char* names[3] = {"gate", "up", "down"};

// One part's stored bytes equal `want`: the merged tensors blk.L.ffn_{proj}_exps.E.numa.i.* and
// the tree's {prefix}_{proj}_{E}_* files (proj: gate, up, down, or gate_bwd ... for backward weights).
void expect_stored(const Checkpoint& merged, const fs::path& tree, const std::string& prefix, std::int64_t layer, std::int64_t e,
                   const std::string& proj, int i, const Packed& want) {
    const std::string key = "blk." + std::to_string(layer) + ".ffn_" + proj + "_exps." + std::to_string(e) + ".numa." + std::to_string(i);
    const TensorView w = merged.view(key + ".weight"), s = merged.view(key + ".scale");
    BOOST_REQUIRE((w.dtype == DType::I8));
    BOOST_REQUIRE((s.dtype == DType::F32));
    BOOST_REQUIRE_MESSAGE(bytes_of(w) == want.codes, key << ".weight differs from the reference");
    BOOST_REQUIRE_MESSAGE(bytes_of(s) == want.scales, key << ".scale differs from the reference");
    // The tree holds the same bytes under kt-kernel's file names.
    const fs::path folder = tree / ("_layer_" + std::to_string(layer)) / ("_numa_" + std::to_string(i));
    const std::string stem = prefix + "_" + proj + "_" + std::to_string(e) + "_";
    BOOST_REQUIRE(read_bytes(folder / (stem + std::to_string(want.codes.size()) + "Byte_quant_.kt")) == want.codes);
    BOOST_REQUIRE(read_bytes(folder / (stem + std::to_string(want.scales.size()) + "Byte_scale_.kt")) == want.scales);
}

// Every expert of every MoE layer, in both formats, against the reference.
void check_family(const Family& f) {
    TempDir dir;
    synth(dir / "src", f);
    const auto config_doc = json::parse(read_text(dir / "src/config.json")).as_object();
    const auto& cfg = config_doc.contains("text_config") ? config_doc.at("text_config").as_object() : config_doc;
    auto inspected = json::parse(run_moequant({"inspect", "--json", (dir / "src").string()}).out).at("plan").as_object();
    const std::int64_t H = cfg.at("hidden_size").to_number<std::int64_t>(), I = inspected.at("expert_intermediate_size").to_number<std::int64_t>(),
                       E = inspected.at("num_experts").to_number<std::int64_t>();
    Checkpoint source = Checkpoint::open(dir / "src");
    for (const std::string method : {"int4", "int8", "moe_int8"})
        for (int parts : {1, 2}) {
            BOOST_TEST_CONTEXT(f.name << " " << f.dtype << " " << f.layout << " " << method << " T=" << parts) {
                const fs::path merged = dir / (method + std::to_string(parts) + "m"), tree = dir / (method + std::to_string(parts) + "t");
                run_convert(dir / "src", merged, method, parts, false);
                run_convert(dir / "src", tree, method, parts, true);
                // verify reads each layout back (INT4's tree, INT8 merged, MOE_INT8 both; the bytes are checked below).
                const bool moe = method == "moe_int8";
                const fs::path checked = method == "int4" || (moe && parts == 1) ? tree : merged;
                if (moe || parts == (method == "int4" ? 1 : 2)) {
                    auto v = run_moequant({"verify", "--source", (dir / "src").string(), "--converted", checked.string(), "--quiet"});
                    BOOST_TEST(v.exit_code == 0, v.out << v.err);
                }
                Checkpoint out = Checkpoint::open(merged);
                const std::string prefix = moe ? "MOE_INT8" : method == "int4" ? "INT4" : "INT8";
                for (const auto& l : inspected.at("moe_layers").as_array()) {
                    const std::int64_t layer = l.to_number<std::int64_t>();
                    for (std::int64_t e = 0; e < E; ++e)
                        for (int p = 0; p < 3; ++p) {
                            const std::int64_t rows = p == 2 ? H : I, cols = p == 2 ? I : H;
                            auto matrix = source_matrix(source, f, layer, e, p, I, H);
                            for (int i = 0; i < parts; ++i) {
                                const std::int64_t n = p == 2 ? rows : rows / parts, k = p == 2 ? cols / parts : cols;
                                const std::vector<std::uint16_t> part = part_of(matrix, rows, cols, p, i, parts);
                                Packed want = moe ? reference_pack_moe_int8(part, n, k, p == 2 ? 64 : 32)
                                                  : reference_pack(part, n, k, method == "int4");
                                expect_stored(out, tree, prefix, layer, e, names[p], i, want);
                            }
                        }
                }
            }
        }
}

// A [rows, cols] matrix as [cols, rows].
std::vector<std::uint16_t> transposed(const std::vector<std::uint16_t>& m, std::int64_t rows, std::int64_t cols) {
    std::vector<std::uint16_t> out(m.size());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) out[static_cast<std::size_t>(c * rows + r)] = m[static_cast<std::size_t>(r * cols + c)];
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(convert)

// --save-backward-weights: each part's backward weights are the part transposed, packed as a
// forward matrix (kt-kernel's SFT prepare_backward_weights), under kt's _bwd names, merged and
// in the tree; the forward tensors stay those of a run without the flag.
BOOST_AUTO_TEST_CASE(backward_weights_are_each_part_transposed_and_packed) {
    TempDir dir;
    const Family f{"qwen3_moe", "bf16", "per-expert"};
    synth(dir / "src", f);
    const auto cfg = json::parse(read_text(dir / "src/config.json")).as_object();
    auto inspected = json::parse(run_moequant({"inspect", "--json", (dir / "src").string()}).out).at("plan").as_object();
    const std::int64_t H = cfg.at("hidden_size").to_number<std::int64_t>(), I = inspected.at("expert_intermediate_size").to_number<std::int64_t>(),
                       E = inspected.at("num_experts").to_number<std::int64_t>();
    std::vector<std::int64_t> layers;
    for (const auto& l : inspected.at("moe_layers").as_array()) layers.push_back(l.to_number<std::int64_t>());
    Checkpoint source = Checkpoint::open(dir / "src");
    const int parts = 2;
    for (const std::string method : {"int4", "int8"}) {
        BOOST_TEST_CONTEXT(method) {
            const fs::path plain = dir / (method + "p"), merged = dir / (method + "m"), tree = dir / (method + "t");
            run_convert(dir / "src", plain, method, parts, false);
            run_convert(dir / "src", merged, method, parts, false, {"--save-backward-weights"});
            run_convert(dir / "src", tree, method, parts, true, {"--save-backward-weights"});
            Checkpoint with = Checkpoint::open(merged), without = Checkpoint::open(plain);
            std::size_t backward = 0;
            for (const auto& name : with.tensor_names()) {
                if (name.find("_bwd_exps.") != std::string::npos) {
                    ++backward;
                    continue;
                }
                BOOST_REQUIRE_MESSAGE(without.contains(name), name);
                BOOST_TEST(bytes_of(with.view(name)) == bytes_of(without.view(name)), name);
            }
            BOOST_TEST(backward == layers.size() * static_cast<std::size_t>(E) * 3 * parts * 2);  // weight and scale of each part
            const std::string prefix = method == "int4" ? "INT4" : "INT8";
            for (std::int64_t layer : layers)
                for (std::int64_t e = 0; e < E; ++e)
                    for (int p = 0; p < 3; ++p) {
                        const std::int64_t rows = p == 2 ? H : I, cols = p == 2 ? I : H;
                        const auto matrix = source_matrix(source, f, layer, e, p, I, H);
                        for (int i = 0; i < parts; ++i) {
                            const std::int64_t n = p == 2 ? rows : rows / parts, k = p == 2 ? cols / parts : cols;
                            const Packed want = reference_pack(transposed(part_of(matrix, rows, cols, p, i, parts), n, k), k, n, method == "int4");
                            expect_stored(with, tree, prefix, layer, e, std::string(names[p]) + "_bwd", i, want);
                        }
                    }
        }
    }
}

// Encoded experts this reference does not decode (compressed-tensors INT4, MXFP4: Kimi-K2-Thinking,
// Kimi-K2.5, DeepSeek-V4) are covered by encoded_sources_test.cpp: their outputs equal those of a
// BF16 twin holding the spec's decoded values, for the same methods, part counts and layouts.
BOOST_AUTO_TEST_CASE(every_family_matches_an_independent_quantization) {
    std::vector<Family> families = {
        {"deepseek_v3", "fp8", "per-expert"},
        {"deepseek_v32", "fp8", "per-expert"},  // power-of-two (ue8m0) block scales, indexer copied
        {"kimi_k2", "fp8", "per-expert"},
        {"qwen3_next", "bf16", "per-expert"},
        {"glm4_moe", "fp8", "per-expert"},
        {"qwen3_moe", "bf16", "fused-bmm"},
        {"mixtral", "bf16", "fused-linear"},
    };
    Family mixtral{"mixtral", "bf16", "per-expert"};
    mixtral.experts = "block_sparse_moe.experts";
    mixtral.projections = {"w1", "w3", "w2"};
    families.push_back(mixtral);
    Family kimi_k25{"kimi_k25", "bf16", "per-expert"};  // a VLM: experts under language_model.
    kimi_k25.prefix = "language_model.model.layers.";
    families.push_back(kimi_k25);
    Family minimax{"minimax_m2", "fp8", "per-expert"};  // the release's FP8 block encoding
    minimax.experts = "block_sparse_moe.experts";
    minimax.projections = {"w1", "w3", "w2"};
    families.push_back(minimax);
    Family minimax_m27 = minimax;  // MiniMax-M2.7's release: M2's tensors, its own config values
    minimax_m27.name = "minimax_m27";
    families.push_back(minimax_m27);
    Family qwen3_5{"qwen3_5_moe", "bf16", "fused-linear"};  // a VLM whose BF16 release is layout A
    qwen3_5.prefix = "model.language_model.layers.";
    families.push_back(qwen3_5);
    families.push_back({"glm_moe_dsa", "fp8", "per-expert"});  // GLM-5-FP8's block-128 experts
    Family m3{"minimax_m3", "bf16", "per-expert"};  // a VLM with M2's expert names, dense first layer
    m3.prefix = "language_model.model.layers.";
    m3.experts = "block_sparse_moe.experts";
    m3.projections = {"w1", "w3", "w2"};
    families.push_back(m3);
    for (const auto& f : families) check_family(f);
}

BOOST_AUTO_TEST_CASE(merged_output_layout_and_metadata) {
    TempDir dir;
    synth(dir / "src", {"deepseek_v3", "fp8", "per-expert"});
    run_convert(dir / "src", dir / "out", "int4", 2, false);
    Checkpoint out = Checkpoint::open(dir / "out");
    // One shard per MoE layer (1 and 2) plus one for everything else, named up front.
    auto shards = out.shard_names();
    std::sort(shards.begin(), shards.end());
    BOOST_TEST((shards == std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                                   "model-00003-of-00003.safetensors"}));
    BOOST_TEST(out.shard_of("blk.1.ffn_up_exps.0.numa.1.weight") == "model-00001-of-00003.safetensors");
    BOOST_TEST(out.shard_of("blk.2.ffn_down_exps.7.numa.0.scale") == "model-00002-of-00003.safetensors");
    const SafetensorsFile& layer1 = out.shard("model-00001-of-00003.safetensors");
    BOOST_TEST(layer1.metadata("moequant.method").value() == "AMXINT4");
    BOOST_TEST(layer1.metadata("moequant.parts").value() == "2");
    BOOST_TEST(layer1.metadata("moequant.experts").value() == "8");
    BOOST_TEST(layer1.metadata("format").value() == "pt");
    // Non-expert tensors renamed as kt-cpu-format.md §7.3, with the source bytes; MTP layer 3 and
    // routed-expert weights and scales are not copied.
    Checkpoint src = Checkpoint::open(dir / "src");
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"model.layers.1.self_attn.q_a_proj.weight", "blk.1.self_attn.q_a_proj.weight"},
             {"model.layers.1.self_attn.q_a_proj.weight_scale_inv", "blk.1.self_attn.q_a_proj.weight_scale_inv"},
             {"model.layers.2.mlp.gate.e_score_correction_bias", "blk.2.mlp.gate.e_score_correction_bias"},
             {"model.layers.1.mlp.shared_experts.down_proj.weight", "blk.1.mlp.shared_experts.down_proj.weight"},
             {"model.embed_tokens.weight", "embed_tokens.weight"},
             {"model.norm.weight", "norm.weight"},
             {"lm_head.weight", "lm_head.weight"}})
        BOOST_TEST(bytes_of(out.view(to)) == bytes_of(src.view(from)), to);
    for (const auto& name : out.tensor_names()) {
        BOOST_TEST(name.find("blk.3.") == std::string::npos, name);  // the MTP layer
        BOOST_TEST(name.find(".mlp.experts.") == std::string::npos, name);
    }
    for (const char* side : {"config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
        BOOST_TEST(read_bytes(dir / "out" / side) == read_bytes(dir / "src" / side), side);
    BOOST_TEST(!fs::exists(dir / "out/generation_config.json"));
}

BOOST_AUTO_TEST_CASE(bytes_do_not_depend_on_threads_and_reruns_continue_exactly) {
    TempDir dir;
    synth(dir / "src", {"glm4_moe", "fp8", "per-expert"});
    run_convert(dir / "src", dir / "one", "int8", 2, false, {"--threads", "1"});
    run_convert(dir / "src", dir / "two", "int8", 2, false, {"--threads", "2"});
    const auto clean = file_hashes(dir / "one");
    BOOST_TEST((file_hashes(dir / "two") == clean));

    // A run that fails after its first layer (a full disk), then the same command again.
    std::vector<std::string> args = {"convert", "-i", (dir / "src").string(), "-o", (dir / "resumed").string(),
                                     "--quant-method", "int8", "--quiet"};
    auto failed = run_moequant(args, {"MOEQUANT_TEST_ENOSPC_AFTER_BYTES=2400000"});
    BOOST_TEST(failed.exit_code == 5, failed.err);
    BOOST_TEST(failed.err.find("DiskFull") != std::string::npos);
    BOOST_TEST(!fs::exists(dir / "resumed/model.safetensors.index.json"));
    for (const auto& e : fs::directory_iterator(dir / "resumed"))
        BOOST_TEST(e.path().filename().string().find(".partial") == std::string::npos, e.path());
    auto again = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(again.exit_code == 0, again.err);
    BOOST_TEST(again.out.find("kept 1 completed earlier") != std::string::npos, again.out);
    BOOST_TEST((file_hashes(dir / "resumed") == clean));

    // --resume-layer redoes layers from the given one; the bytes stay the same.
    auto resumed = run_moequant({"convert", "-i", (dir / "src").string(), "-o", (dir / "resumed").string(), "--quant-method",
                                 "int8", "--resume-layer", "2", "--quiet"});
    BOOST_REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.err);
    BOOST_TEST(resumed.out.find("converted 1 layer(s), kept 1") != std::string::npos, resumed.out);
    BOOST_TEST((file_hashes(dir / "resumed") == clean));
}

// Only the test build of the host (moequant-fault-host) reads the fault variables: the release
// host converts as if they were unset, though each would make this run fail.
BOOST_AUTO_TEST_CASE(the_release_host_ignores_the_fault_variables) {
    TempDir dir;
    synth(dir / "src", {"glm4_moe", "fp8", "per-expert"});
    const std::vector<std::string> faults = {"MOEQUANT_TEST_ENOSPC_AFTER_BYTES=1000", "MOEQUANT_TEST_FREE_BYTES=1000",
                                             "MOEQUANT_TEST_KILL_RANK=0:1"};
    auto r = run_command({host_executable().string(), "convert", "-i", (dir / "src").string(), "-o", (dir / "out").string(),
                          "--quant-method", "int8", "--quiet"},
                         faults);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST(fs::exists(dir / "out/model.safetensors.index.json"));
}

BOOST_AUTO_TEST_CASE(refusals) {
    TempDir dir;
    synth(dir / "src", {"deepseek_v3", "fp8", "per-expert"});
    auto mismatch = run_moequant({"convert", "-i", (dir / "src").string(), "-o", (dir / "a").string(), "--input-type", "bf16"});
    BOOST_TEST(mismatch.exit_code == 3);
    BOOST_TEST(mismatch.err.find("InputTypeMismatch") != std::string::npos, mismatch.err);
    BOOST_TEST(!fs::exists(dir / "a"));
    auto split = run_moequant({"convert", "-i", (dir / "src").string(), "-o", (dir / "a").string(), "--threadpool-count", "3"});
    BOOST_TEST(split.exit_code == 3);
    BOOST_TEST(split.err.find("not divisible by 3") != std::string::npos, split.err);
    auto unpackable = run_moequant({"convert", "-i", (dir / "src").string(), "-o", (dir / "a").string(), "--threadpool-count", "4"});
    BOOST_TEST(unpackable.exit_code == 3);  // I/T = 64 rows is fine for INT4 but the down part has k = 64 < 128
    BOOST_TEST(unpackable.err.find("UnpackableShape") != std::string::npos, unpackable.err);
    fs::create_directories(dir / "busy");
    write_text(dir / "busy/notes.txt", "mine");
    auto busy = run_moequant({"convert", "-i", (dir / "src").string(), "-o", (dir / "busy").string(), "--quiet"});
    BOOST_TEST(busy.exit_code == 5);
    BOOST_TEST(busy.err.find("OutputExists") != std::string::npos, busy.err);
    BOOST_TEST(fs::exists(dir / "busy/notes.txt"));
    // --overwrite removes only what a conversion writes: a user's file refuses it, untouched.
    auto foreign = run_moequant({"convert", "-i", (dir / "src").string(), "-o", (dir / "busy").string(), "--quiet", "--overwrite"});
    BOOST_TEST(foreign.exit_code == 5);
    BOOST_TEST(foreign.err.find("ForeignEntry") != std::string::npos, foreign.err);
    BOOST_TEST(read_text(dir / "busy/notes.txt") == "mine");
    fs::remove(dir / "busy/notes.txt");
    BOOST_TEST(run_moequant({"convert", "-i", (dir / "src").string(), "-o", (dir / "busy").string(), "--quiet"}).exit_code == 0);
    // Another job into the same folder (other method) is refused too.
    auto other = run_moequant({"convert", "-i", (dir / "src").string(), "-o", (dir / "busy").string(), "--quant-method", "int8", "--quiet"});
    BOOST_TEST(other.exit_code == 5);
    BOOST_TEST(other.err.find("another conversion") != std::string::npos, other.err);
}

// The rest of convert_cpu_weights.py's flags: --gpu changes nothing (said once), and what
// moequant does not write is refused by name before any file, never taken for something else.
BOOST_AUTO_TEST_CASE(seed_cpu_tool_flags_are_accepted_or_refused_by_name) {
    TempDir dir;
    synth(dir / "src", {"qwen3_moe", "bf16", "per-expert"});
    const std::vector<std::string> base = {"convert", "-i", (dir / "src").string(), "--input-type", "bf16"};
    auto with = [&](const fs::path& out, std::vector<std::string> extra) {
        std::vector<std::string> args = base;
        args.insert(args.end(), {"-o", out.string()});
        args.insert(args.end(), extra.begin(), extra.end());
        return run_moequant(args);
    };
    auto plain = with(dir / "plain", {});
    auto gpu = with(dir / "gpu", {"--gpu"});
    BOOST_REQUIRE_MESSAGE(plain.exit_code == 0 && gpu.exit_code == 0, plain.err << gpu.err);
    BOOST_TEST(gpu.err.find("--gpu: no effect, moequant converts on the CPU") != std::string::npos, gpu.err);
    BOOST_TEST((file_hashes(dir / "gpu") == file_hashes(dir / "plain")));
    // kt's script skips the backward weights of MOE_INT8 with a warning and writes the rest.
    auto moe = with(dir / "moe", {"--quant-method", "moe_int8", "--save-backward-weights"});
    BOOST_TEST(moe.exit_code == 0, moe.err);
    BOOST_TEST(contains(moe.err, "--save-backward-weights: MOE_INT8 has no SFT method"), moe.err);
    BOOST_TEST(fs::exists(dir / "moe/model.safetensors.index.json"));
    // --profile: the same files plus a Chrome trace with a "layer" span per layer and the steps
    // under them; the tables on stdout; --overwrite takes the trace as the output's own.
    auto profiled = with(dir / "profiled", {"--profile"});
    BOOST_REQUIRE_MESSAGE(profiled.exit_code == 0, profiled.err);
    auto hashes = file_hashes(dir / "profiled");
    BOOST_TEST(hashes.erase("profile_trace.json") == 1u);
    auto plain_hashes = file_hashes(dir / "plain");
    BOOST_TEST((hashes == plain_hashes));
    const auto trace = json::parse(read_text(dir / "profiled/profile_trace.json")).as_object();
    std::map<std::string, int> spans;
    std::set<std::string> layers;
    for (const auto& e : trace.at("traceEvents").as_array()) {
        BOOST_TEST(e.at("ph").as_string() == "X");
        BOOST_TEST(e.at("dur").to_number<std::int64_t>() >= 0);
        ++spans[std::string(e.at("name").as_string())];
        if (e.at("name").as_string() == "layer") layers.insert(std::string(e.at("args").at("detail").as_string()));
    }
    BOOST_TEST((layers == std::set<std::string>{"layer 0", "layer 1"}));
    BOOST_TEST(spans["decode"] == 8 * 3 * 2);      // every expert matrix of both layers
    BOOST_TEST(spans["quantize"] == 8 * 3 * 2 * 2);  // in 2 parts each (--threadpool-count's default)
    BOOST_TEST(spans["finish"] == 1);
    BOOST_TEST(contains(profiled.out, "profile: time by step"), profiled.out);
    BOOST_TEST(contains(profiled.out, "profile: layers, slowest first"), profiled.out);
    auto again = with(dir / "profiled", {"--profile", "--overwrite", "--quiet"});
    BOOST_TEST(again.exit_code == 0, again.err);
    BOOST_TEST(!contains(again.out, "profile:"), again.out);
    // --quant-method awq on this BF16 source: awq_method_test.cpp.
    const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
        {{"--quant-method", "moe_int4"}, "--quant-method moe_int4: kt-kernel has no MOE_INT4 on x86"},
    };
    for (const auto& [extra, message] : refused) {
        auto r = with(dir / "refused", extra);
        BOOST_TEST(r.exit_code == 2, extra.front() << ": " << r.err);
        BOOST_TEST(r.err.find(message) != std::string::npos, r.err);
        BOOST_TEST(!fs::exists(dir / "refused"));
    }
}

BOOST_AUTO_TEST_CASE(bf16_export_dequantizes_fp8_and_drops_scales) {
    TempDir dir;
    synth(dir / "src", {"deepseek_v3", "fp8", "per-expert"});
    auto r = run_moequant({"convert", "-i", (dir / "src").string(), "-o", (dir / "bf16").string(), "--format", "bf16-safetensors", "--quiet"});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Checkpoint src = Checkpoint::open(dir / "src"), out = Checkpoint::open(dir / "bf16");
    std::size_t converted = 0;
    for (const auto& name : src.tensor_names()) {
        const bool mtp = name.rfind("model.layers.3.", 0) == 0;
        if (name.ends_with("_scale_inv") || mtp) {
            BOOST_TEST(!out.contains(name), name);
            continue;
        }
        BOOST_REQUIRE_MESSAGE(out.contains(name), name);
        TensorView s = src.view(name), o = out.view(name);
        BOOST_TEST((o.shape == s.shape));
        if (s.dtype != DType::F8_E4M3) {
            BOOST_TEST(bytes_of(o) == bytes_of(s), name);
            continue;
        }
        BOOST_TEST((o.dtype == DType::BF16));
        TensorView scale = src.view(name + "_scale_inv");
        for (std::int64_t i = 0; i < s.shape[0]; ++i)
            for (std::int64_t j = 0; j < s.shape[1]; ++j) {
                const auto k = static_cast<std::size_t>(i * s.shape[1] + j);
                const float sc = element<float>(scale, static_cast<std::size_t>((i / 128) * scale.shape[1] + j / 128));
                if (element<std::uint16_t>(o, k) != bf16_round(e4m3(element<std::uint8_t>(s, k)) * sc)) BOOST_FAIL(name << " differs at " << k);
            }
        ++converted;
    }
    BOOST_TEST(converted > 50u);
    auto config = json::parse(read_text(dir / "bf16/config.json")).as_object();
    BOOST_TEST(!config.contains("quantization_config"));
    BOOST_TEST(config.at("model_type").as_string() == "deepseek_v3");
}

BOOST_AUTO_TEST_SUITE_END()
