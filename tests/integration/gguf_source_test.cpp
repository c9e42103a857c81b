// A GGUF model read as a source checkpoint (`convert -i model.gguf`): the reader presents its
// tensors under the family's Hugging Face names and the ggml encoding decodes them as ggml's
// dequantizers do. A BF16 GGUF reads back as the very checkpoint it was written from (names, the
// llama Q/K row order, deepseek2's MLA split, the config); a Q4_K_M one decodes to ggml's values
// and converts to AMX INT4 byte for byte as its decoded BF16 twin does. docs/gguf-source.md.
#include "ggml_types.hpp"
#include "gguf_container.hpp"
#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/embedded_text.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/engine/tokenizer.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>

using namespace moequant;
using namespace moequant::formats;
using namespace moequant::test;

namespace {

struct Family {
    std::string name, dtype;
};
const Family families[] = {{"qwen3_moe", "bf16"}, {"mixtral", "bf16"}, {"deepseek_v3", "fp8"}, {"glm4_moe", "bf16"}, {"minimax_m2", "fp8"},
                           {"deepseek_v32", "fp8"}};

void run_ok(const std::vector<std::string>& args) {
    auto r = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
}

// `src` written as one GGUF of `preset`; its path.
fs::path write_gguf(const fs::path& src, const fs::path& out, const std::string& preset) {
    run_ok({"convert", "-i", src.string(), "-o", out.string(), "--format", "gguf", "--quant-method", preset, "--single-file", "--quiet"});
    return out / "model.gguf";
}

std::vector<std::uint8_t> view_bytes(const Checkpoint& c, const std::string& name) {
    const TensorView v = c.view(name);
    const auto* p = reinterpret_cast<const std::uint8_t*>(v.bytes.data());
    return {p, p + v.bytes.size()};
}

// Config values as a reader takes them: numbers by value (5000000 and 5e6 alike).
bool same_value(const boost::json::value& a, const boost::json::value& b) {
    if (a.is_number() && b.is_number()) return a.to_number<double>() == b.to_number<double>();
    return a == b;
}

// A plain tensor's values as float32.
std::vector<float> values_of(const Checkpoint& c, const std::string& name) {
    const TensorView v = c.view(name);
    std::vector<float> out(v.elements());
    decode_to_f32(v, std::span(out));
    return out;
}

// The BF16 bits ggml's dequantizer gives for `rows` rows of `type` at `bytes`.
std::vector<std::uint8_t> ggml_bf16(const ggml_quants::GgmlType& type, const std::uint8_t* bytes, std::int64_t rows, std::int64_t cols) {
    std::vector<float> values(static_cast<std::size_t>(cols));
    std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * cols * 2));
    for (std::int64_t r = 0; r < rows; ++r) {
        type.dequantize(bytes + r * type.row_bytes(cols), values.data(), cols);
        convert_f32_to_bf16(values.data(), out.data() + r * cols * 2, static_cast<std::size_t>(cols));
    }
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_source)

// moequant's BF16 GGUF of a BF16 checkpoint, read back through the reader and written as BF16
// safetensors, is the checkpoint: every tensor the GGUF holds, bit for bit under its own name
// (llama's interleaved Q/K rows put back, deepseek2's attn_k_b / attn_v_b merged into kv_b_proj),
// and the config's fields.
BOOST_AUTO_TEST_CASE(a_bf16_gguf_reads_back_as_its_checkpoint) {
    // GLM-5's tiny synthesized indexer heads are not twice its rotary dimension, which llama.cpp's
    // glm-dsa needs: the small one is written.
    for (const std::string family : {"qwen3_moe", "mixtral", "deepseek_v3", "glm4_moe", "minimax_m2", "deepseek_v32", "glm_moe_dsa"}) {
        BOOST_TEST_CONTEXT(family) {
            TempDir dir;
            synth_checkpoint(dir / "src", {family, "bf16"}, family == "glm_moe_dsa" ? std::vector<std::string>{"--preset", "small"} : std::vector<std::string>{});
            const fs::path gguf = write_gguf(dir / "src", dir / "gguf", "BF16");
            run_ok({"convert", "-i", gguf.string(), "-o", (dir / "back").string(), "--format", "bf16-safetensors", "--quiet"});
            Checkpoint source = Checkpoint::open(dir / "src"), back = Checkpoint::open(dir / "back");
            std::size_t compared = 0;
            for (const std::string& name : back.tensor_names()) {
                BOOST_TEST_CONTEXT(name) {
                    BOOST_REQUIRE(source.contains(name));
                    BOOST_TEST(back.info(name).shape == source.info(name).shape);
                    // The converter keeps norms and the router in F32: the same values.
                    BOOST_TEST((values_of(back, name) == values_of(source, name)));
                    ++compared;
                }
            }
            // Everything else is what the GGUF leaves out, as llama.cpp's converter does: the MTP
            // layer (past num_hidden_layers) and rotary buffers.
            const std::string mtp = "layers." + std::to_string(source.config().require_int("num_hidden_layers")) + ".";
            for (const std::string& name : source.tensor_names())
                if (!back.contains(name)) BOOST_TEST((contains(name, mtp) || contains(name, "rotary_emb")), name);
            BOOST_TEST(compared > 10u);
            const auto want = boost::json::parse(read_text(dir / "src/config.json")).as_object();
            const auto got = boost::json::parse(read_text(dir / "back/config.json")).as_object();
            for (const char* key : {"model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
                                    "rms_norm_eps", "rope_theta", "num_experts_per_tok", "moe_intermediate_size", "num_experts", "n_routed_experts",
                                    "num_local_experts", "n_shared_experts", "first_k_dense_replace", "kv_lora_rank", "q_lora_rank",
                                    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "routed_scaling_factor", "norm_topk_prob",
                                    "scoring_func", "n_group", "topk_group", "tie_word_embeddings", "head_dim", "intermediate_size",
                                    "partial_rotary_factor", "use_qk_norm", "attention_bias", "rotary_dim", "use_routing_bias",
                                    "index_n_heads", "index_head_dim", "index_topk", "indexer_types", "rope_interleave"})
                if (want.contains(key)) BOOST_TEST((got.contains(key) && same_value(got.at(key), want.at(key))), key << ": " << (got.contains(key) ? boost::json::serialize(got.at(key)) : "absent"));
        }
    }
}

// A Q4_K_M GGUF (deepseek_v3 from FP8) decodes to ggml's values, and converting it to AMX INT4 gives
// the bytes converting its BF16 twin gives.
BOOST_AUTO_TEST_CASE(a_quantized_gguf_converts_as_its_bf16_twin) {
    for (const Family& f : families) {
        BOOST_TEST_CONTEXT(f.name) {
            TempDir dir;
            synth_checkpoint(dir / "src", {f.name, f.dtype});
            const fs::path gguf = write_gguf(dir / "src", dir / "gguf", "Q4_K_M");
            run_ok({"convert", "-i", gguf.string(), "-o", (dir / "twin").string(), "--format", "bf16-safetensors", "--quiet"});
            run_ok({"convert", "-i", gguf.string(), "-o", (dir / "direct").string(), "--quant-method", "int4", "--quiet"});
            run_ok({"convert", "-i", (dir / "twin").string(), "-o", (dir / "via_twin").string(), "--quant-method", "int4", "--quiet"});
            const auto direct = file_hashes(dir / "direct"), via_twin = file_hashes(dir / "via_twin");
            BOOST_TEST(direct.size() > 2u);
            BOOST_TEST((direct == via_twin));

            // Every expert matrix of the twin is ggml's dequantization of its stacked rows.
            const std::vector<std::uint8_t> file = read_bytes(gguf);
            const GgufFile header = read_gguf_header(std::as_bytes(std::span(file)), gguf.string());
            Checkpoint twin = Checkpoint::open(dir / "twin");
            std::size_t experts = 0;
            for (const GgufTensorInfo& t : header.tensors) {
                if (t.name.find("_exps.weight") == std::string::npos) continue;
                const ggml_quants::GgmlType* type = nullptr;
                for (const auto& candidate : ggml_quants::ggml_types())
                    if (candidate.id == static_cast<int>(t.type)) type = &candidate;
                BOOST_REQUIRE(type);
                const std::int64_t layer = std::stoll(t.name.substr(4));
                const std::string projection = t.name.find("gate") != std::string::npos ? "gate" : t.name.find("_up_") != std::string::npos ? "up" : "down";
                const std::int64_t matrix = t.ne[1] * type->row_bytes(t.ne[0]);
                for (std::int64_t e = 0; e < t.ne[2]; ++e) {
                    const std::string name = f.name == "mixtral" || f.name == "minimax_m2"
                                                 ? "model.layers." + std::to_string(layer) + ".block_sparse_moe.experts." + std::to_string(e) + ".w" +
                                                       (projection == "gate" ? "1" : projection == "up" ? "3" : "2") + ".weight"
                                                 : "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(e) + "." + projection + "_proj.weight";
                    BOOST_TEST_CONTEXT(name) {
                        BOOST_TEST((view_bytes(twin, name) == ggml_bf16(*type, file.data() + t.offset + e * matrix, t.ne[1], t.ne[0])));
                    }
                    ++experts;
                }
            }
            BOOST_TEST(experts > 0u);
        }
    }
}

// The tokenizer rebuilt from tokenizer.ggml.* splits text with llama.cpp's expressions for the
// file's pre-tokenizer: Qwen3's (qwen2) tokenizes the embedded text exactly as the checkpoint's
// tokenizer.json, DeepSeek's (deepseek-v3) groups digits by three, as llama.cpp does; and eval
// runs on GGUF files alone (the Q8_0 file's model against its Q4_K_M experts).
BOOST_AUTO_TEST_CASE(a_gguf_tokenizes_text_as_llama_cpp_splits_it) {
    Registry registry;
    registry.load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / "moequant-format-gguf.so", PluginOrigin::explicit_file);
    BOOST_REQUIRE(registry.readers().size() == 1u);
    const std::string text(embedded_calibration_text());
    for (const std::string family : {"qwen3_moe", "deepseek_v3"}) {
        BOOST_TEST_CONTEXT(family) {
            TempDir dir;
            synth_checkpoint(dir / "src", {family, "bf16"});
            const fs::path gguf = write_gguf(dir / "src", dir / "q8", "Q8_0");
            const Checkpoint c = open_checkpoint(registry, gguf);
            BOOST_TEST(c.container() == "gguf");
            const auto rebuilt_json = c.side_file("tokenizer.json");
            BOOST_REQUIRE(rebuilt_json.has_value());
            const Tokenizer rebuilt = Tokenizer::parse(*rebuilt_json, c.side_file("tokenizer_config.json").value_or(""), "rebuilt");
            const Tokenizer original = Tokenizer::load(dir / "src" / "tokenizer.json");
            if (family == "qwen3_moe") {
                BOOST_TEST((rebuilt.encode(text, true) == original.encode(text, true)));
            } else {
                // llama.cpp's deepseek-v3 splits digits into runs of at most three before the merges.
                auto joined = [&](std::initializer_list<const char*> parts) {
                    std::vector<std::int32_t> ids;
                    for (const char* p : parts)
                        for (std::int32_t id : rebuilt.encode(p)) ids.push_back(id);
                    return ids;
                };
                BOOST_TEST((rebuilt.encode("12345678") == joined({"123", "456", "78"})));
                // BOS first, as the file's add_bos_token says.
                BOOST_TEST(rebuilt.encode("a", true).front() == original.encode("a", true).front());
            }
            const fs::path q4 = write_gguf(dir / "src", dir / "q4", "Q4_K_M");
            auto r = run_moequant({"eval", "--model_id", gguf.string(), "--cpu-weights", q4.string(), "--dataset", "embedded",
                                   "--num_calibration_samples", "2", "--max_sequence_length", "32", "--json", "-q"});
            BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            const double kl = boost::json::parse(r.out).at("kl_mean").as_double();
            BOOST_TEST((kl > 0 && kl < 1), kl);
        }
    }
}

// `gptq --model_id model.gguf` calibrates on text through the tokenizer rebuilt from the file.
// The forward computes with the GGUF's own values (ggml's float32 decode of its Q8_0 attention),
// so its MoE inputs differ from the BF16 twin's by that rounding alone; on the same recorded
// inputs GPTQ of the file and of its twin write the same bytes, and verify, given the GGUF as the
// source, passes what GPTQ calibrated on the file wrote.
BOOST_AUTO_TEST_CASE(gptq_calibrates_a_gguf_on_its_own_tokens) {
    TempDir dir;
    synth_checkpoint(dir / "src", {"qwen3_moe", "bf16"});
    const fs::path gguf = write_gguf(dir / "src", dir / "q8", "Q8_0");
    run_ok({"convert", "-i", gguf.string(), "-o", (dir / "twin").string(), "--format", "bf16-safetensors", "--quiet"});
    const std::vector<std::string> text{"--dataset", "embedded", "--num_calibration_samples", "2", "--max_sequence_length", "32", "--quiet"};
    auto with_text = [&](std::vector<std::string> args) {
        args.insert(args.end(), text.begin(), text.end());
        run_ok(args);
    };
    for (const auto& [source, name] : {std::pair{dir / "src", "src"}, {gguf, "gguf"}, {dir / "twin", "twin"}})
        with_text({"record", "--model_id", source.string(), "--output", (dir / (std::string(name) + ".safetensors")).string()});
    const Checkpoint src = Checkpoint::open(dir / "src.safetensors"), from_gguf = Checkpoint::open(dir / "gguf.safetensors"),
                     twin = Checkpoint::open(dir / "twin.safetensors");
    BOOST_TEST((view_bytes(from_gguf, "sample_lengths") == view_bytes(src, "sample_lengths")));
    for (const char* layer : {"layers.0.moe_input", "layers.1.moe_input"}) {
        const double error = max_relative_error(values_of(from_gguf, layer), values_of(twin, layer));
        BOOST_TEST(error < 0.02, layer << ": " << error);
    }

    const std::string recorded = (dir / "gguf.safetensors").string();
    for (const auto& [source, out] : {std::pair{gguf, dir / "fixed_gguf"}, {dir / "twin", dir / "fixed_twin"}})
        run_ok({"gptq", "--model_id", source.string(), "--output_dir", out.string(), "--quant_type", "W4A16", "--calibration-activations",
                recorded, "--quiet"});
    const auto fixed_gguf = file_hashes(dir / "fixed_gguf");
    BOOST_TEST(fixed_gguf.count("tokenizer.json") == 1u);
    BOOST_TEST((fixed_gguf == file_hashes(dir / "fixed_twin")));

    with_text({"gptq", "--model_id", gguf.string(), "--output_dir", (dir / "on_text").string(), "--quant_type", "W4A16"});
    auto v = run_moequant({"verify", "--source", gguf.string(), "--converted", (dir / "on_text").string(), "--calibration-activations",
                           recorded, "--quiet"});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);
}

// What the reader cannot take is refused naming the file and the reason, before any output.
BOOST_AUTO_TEST_CASE(what_the_reader_cannot_take_is_refused) {
    TempDir dir;
    synth_checkpoint(dir / "gpt", {"gpt_oss", "mxfp4"});
    const fs::path gpt = write_gguf(dir / "gpt", dir / "gpt_gguf", "MXFP4_MOE");
    synth_checkpoint(dir / "qwen", {"qwen3_moe", "bf16"});
    const fs::path qwen = write_gguf(dir / "qwen", dir / "qwen_gguf", "Q8_0");
    // A truncated copy: its header promises data past the end.
    std::vector<std::uint8_t> bytes = read_bytes(qwen);
    bytes.resize(bytes.size() / 2);
    write_bytes(dir / "cut.gguf", bytes);
    check_refusals({{{"convert", "-i", gpt.string(), "-o", (dir / "out").string(), "--quant-method", "int4"}, 3, "architecture 'gpt-oss'"},
                    {{"convert", "-i", (dir / "cut.gguf").string(), "-o", (dir / "out").string(), "--quant-method", "int4"}, 3, "cut.gguf"},
                    {{"convert", "-i", qwen.string(), "-o", (dir / "out").string(), "--format", "gguf", "--quant-method", "Q4_K_M"}, 2,
                     "is not written as GGUF again"}},
                   dir / "out");
}

// A copy of `file` with the u32 value of metadata key `key` set to `value`.
fs::path with_u32(const fs::path& file, const std::string& key, std::uint32_t value, const fs::path& out) {
    std::vector<std::uint8_t> bytes = read_bytes(file);
    const std::string needle = key;
    auto at = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
    BOOST_REQUIRE(at != bytes.end());
    const std::size_t value_at = static_cast<std::size_t>(at - bytes.begin()) + needle.size() + 4;  // after the type tag
    std::uint32_t type = 0;
    std::memcpy(&type, bytes.data() + value_at - 4, 4);
    BOOST_REQUIRE(type == 4u);  // GGUF's u32
    std::memcpy(bytes.data() + value_at, &value, 4);
    write_bytes(out, bytes);
    return out;
}

// Counts read from the metadata are hostile: out of range, or disagreeing with the tensors, they
// are refused with exit 3 naming the file, before any output.
BOOST_AUTO_TEST_CASE(hostile_metadata_is_refused_naming_the_key) {
    TempDir dir;
    synth_checkpoint(dir / "src", {"qwen3_moe", "bf16"});
    const fs::path gguf = write_gguf(dir / "src", dir / "gguf", "Q8_0");
    auto convert = [&](const fs::path& file) {
        return std::vector<std::string>{"convert", "-i", file.string(), "-o", (dir / "out").string(), "--quant-method", "int4"};
    };
    check_refusals({{convert(with_u32(gguf, "qwen3moe.expert_count", 0, dir / "e0.gguf")), 3, "qwen3moe.expert_count is 0"},
                    {convert(with_u32(gguf, "qwen3moe.block_count", 1u << 30, dir / "b.gguf")), 3, "qwen3moe.block_count is 1073741824"},
                    {convert(with_u32(gguf, "qwen3moe.expert_count", 4, dir / "e4.gguf")), 3, "e4.gguf"},
                    {convert(with_u32(gguf, "qwen3moe.expert_count", 16, dir / "e16.gguf")), 3, "e16.gguf"}},
                   dir / "out");
}

BOOST_AUTO_TEST_SUITE_END()
