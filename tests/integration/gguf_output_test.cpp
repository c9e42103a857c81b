// convert --format gguf as a user meets it: a synthesized Qwen3-MoE becomes gguf-split parts
// (the metadata and non-expert tensors first, one part per MoE layer) whose headers, metadata
// and per-tensor types are llama-quantize's (Q4_K_M's Q6_K ffn_down in its use_more_bits layers,
// --tensor-type overrides), whose expert rows verify decodes against the source, which a rerun
// keeps and --dry-run sizes exactly; and what GGUF cannot hold yet is refused before any file.
// ggml's own reader and kt-kernel's LLAMAFILE forward on these files: docs/gguf-format.md.
#include "ggml_types.hpp"
#include "gguf_container.hpp"
#include "gguf_imatrix.hpp"
#include "gguf_type_policy.hpp"
#include "reference_numerics.hpp"
#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/dtype_convert.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

using namespace moequant;
using namespace moequant::formats;
using namespace moequant::test;

namespace {

std::vector<std::string> gguf_args(const fs::path& src, const fs::path& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"convert", "-i", src.string(), "-o", out.string(), "--format", "gguf", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

// `source` synthesized in `src` and converted to GGUF in `out` with `args`, which must succeed.
void synth_and_convert(const fs::path& src, const fs::path& out, const SynthSource& source, std::vector<std::string> args) {
    synth_checkpoint(src, source);
    auto r = run_moequant(gguf_args(src, out, std::move(args)));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
}

// An integer of a synthesized model's config.json.
std::uint64_t config_number(const fs::path& model, const char* key) {
    const auto config = boost::json::parse(read_text(model / "config.json")).as_object();
    return static_cast<std::uint64_t>(config.at(key).to_number<std::int64_t>());
}

// An unsigned key the file must have.
std::uint64_t unsigned_key(const GgufFile& file, const std::string& key) {
    const GgufValue* v = file.find(key);
    BOOST_REQUIRE_MESSAGE(v && v->as_unsigned(), key);
    return *v->as_unsigned();
}

// gguf-split's name of part `k` (from 1) of `parts`.
std::string part_name(std::size_t k, std::size_t parts) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.gguf", k, parts);
    return name;
}

// Every tensor of every part: name -> ggml type.
std::map<std::string, std::uint32_t> tensor_types(const fs::path& out, std::size_t parts) {
    std::map<std::string, std::uint32_t> types;
    for (std::size_t i = 1; i <= parts; ++i)
        for (const auto& t : read_gguf_file_header((out / part_name(i, parts)).string()).tensors) types[t.name] = t.type;
    return types;
}

struct TensorData {
    GgufTensorInfo info;
    std::vector<std::uint8_t> bytes;
};

TensorData tensor_data(const fs::path& file, const std::string& name) {
    const GgufFile header = read_gguf_file_header(file.string());
    const GgufTensorInfo* t = header.tensor(name);
    BOOST_REQUIRE_MESSAGE(t, name << " in " << file);
    const std::vector<std::uint8_t> all = read_bytes(file);
    const auto at = all.begin() + static_cast<std::ptrdiff_t>(t->offset);
    return {*t, {at, at + static_cast<std::ptrdiff_t>(t->bytes)}};
}

// What llama-quantize writes for a BF16 tensor in the type `as` has: ggml's rows of its values.
std::vector<std::uint8_t> ggml_rows_from_bf16(const TensorData& bf16, const GgufTensorInfo& as) {
    const auto* codec = ggml_quants::ggml_type_named(ggml_type_name_of(as.type));
    const std::int64_t cols = bf16.info.ne[0], rows = static_cast<std::int64_t>(bf16.bytes.size() / 2) / cols;
    std::vector<float> values(bf16.bytes.size() / 2);
    convert_bf16_to_f32(bf16.bytes.data(), values.data(), values.size());
    std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * codec->row_bytes(cols)));
    for (std::int64_t r = 0; r < rows; ++r) codec->quantize(values.data() + r * cols, out.data() + r * codec->row_bytes(cols), cols, nullptr);
    return out;
}

// Copies of a synthesized model, each with one change to its config.json, and the Q4_K_M GGUF
// conversion of each into dir/refused (for check_refusals).
struct ConfigEdits {
    fs::path source, dir;
    int made = 0;
    std::vector<std::string> operator()(const std::string& from, const std::string& to) {
        const fs::path model = dir / ("edited" + std::to_string(++made));
        fs::copy(source, model);
        std::string json = read_text(model / "config.json");
        BOOST_REQUIRE(json.find(from) != std::string::npos);
        json.replace(json.find(from), from.size(), to);
        write_text(model / "config.json", json);
        return gguf_args(model, dir / "refused", {"--quant-method", "Q4_K_M"});
    }
};

// What llama-quantize --allow-requantize makes of tensor `from` (any type ggml decodes) in the
// type `as` has: `from` dequantized, then ggml's rows of that.
std::vector<std::uint8_t> requantized(const TensorData& from, const GgufTensorInfo& as) {
    const std::int64_t cols = from.info.ne[0];
    std::int64_t rows = 1;
    for (std::size_t d = 1; d < from.info.ne.size(); ++d) rows *= from.info.ne[d];
    std::vector<float> values(static_cast<std::size_t>(rows * cols));
    if (from.info.type == ggml_type_id::f32) std::memcpy(values.data(), from.bytes.data(), values.size() * 4);
    else {
        const auto* in = ggml_quants::ggml_type_named(ggml_type_name_of(from.info.type));
        for (std::int64_t r = 0; r < rows; ++r) in->dequantize(from.bytes.data() + r * in->row_bytes(cols), values.data() + r * cols, cols);
    }
    const auto* out = ggml_quants::ggml_type_named(ggml_type_name_of(as.type));
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * out->row_bytes(cols)));
    for (std::int64_t r = 0; r < rows; ++r) out->quantize(values.data() + r * cols, bytes.data() + r * out->row_bytes(cols), cols, nullptr);
    return bytes;
}

// The rows of a BF16 tensor of a GGUF file, as stored.
std::vector<std::uint16_t> gguf_bf16(const fs::path& file, const GgufTensorInfo& t) {
    const auto bytes = read_bytes(file);
    std::vector<std::uint16_t> out(t.bytes / 2);
    std::memcpy(out.data(), bytes.data() + t.offset, t.bytes);
    return out;
}

// llama's converter on a [rows, cols] weight: reshape(heads, 2, rows/heads/2, cols).swapaxes(1, 2),
// spelled as that index arithmetic (independent of the writer's).
std::vector<std::uint16_t> llama_permuted(const TensorView& w, std::int64_t heads) {
    const std::int64_t rows = w.shape[0], cols = w.shape[1], half = rows / heads / 2;
    const auto* in = reinterpret_cast<const std::uint16_t*>(w.data());
    std::vector<std::uint16_t> out(static_cast<std::size_t>(rows * cols));
    std::size_t at = 0;  // the swapped array, read in C order: [head][j][s][col]
    for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t j = 0; j < half; ++j)
            for (std::int64_t s = 0; s < 2; ++s)
                for (std::int64_t c = 0; c < cols; ++c) out[at++] = in[((h * 2 + s) * half + j) * cols + c];
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_output)

BOOST_AUTO_TEST_CASE(q4_k_m_parts_hold_llama_quantizes_types_and_verify) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out";
    synth_and_convert(src, out, {"qwen3_moe", "bf16"}, {"--quant-method", "Q4_K_M"});
    // The tiny preset has 2 MoE layers: 3 parts.
    const GgufFile first = read_gguf_file_header((out / "model-00001-of-00003.gguf").string());
    BOOST_TEST(first.find("general.architecture")->as_string().value() == "qwen3moe");
    BOOST_TEST(first.find("general.file_type")->as_unsigned().value() == 15u);  // MOSTLY_Q4_K_M
    BOOST_TEST(first.find("split.count")->as_unsigned().value() == 3u);
    BOOST_TEST(first.find("qwen3moe.expert_count")->as_unsigned().value() == 8u);
    BOOST_TEST(first.find("tokenizer.ggml.model")->as_string().value() == "gpt2");
    BOOST_TEST(first.find("tokenizer.ggml.tokens")->as_strings().value().size() > 100u);
    const GgufFile layer1 = read_gguf_file_header((out / "model-00003-of-00003.gguf").string());
    BOOST_TEST(!layer1.find("general.architecture"));  // metadata only in the first part
    BOOST_TEST(layer1.find("split.no")->as_unsigned().value() == 2u);

    const auto types = tensor_types(out, 3);
    using namespace ggml_type_id;
    BOOST_TEST(types.at("blk.0.ffn_down_exps.weight") == q4_k);
    BOOST_TEST(types.at("blk.1.ffn_down_exps.weight") == q6_k);  // use_more_bits(1, 2)
    BOOST_TEST(types.at("blk.0.ffn_gate_exps.weight") == q4_k);
    BOOST_TEST(types.at("blk.0.attn_v.weight") == q8_0);         // 8 experts: llama.cpp's Mixtral rule
    BOOST_TEST(types.at("blk.0.attn_norm.weight") == f32);
    BOOST_TEST(types.at("blk.0.ffn_gate_inp.weight") == f32);
    BOOST_TEST(types.at("output.weight") == q6_k);
    const GgufTensorInfo& gate = *layer1.tensor("blk.1.ffn_gate_exps.weight");
    BOOST_TEST(gate.ne.size() == 3u);
    BOOST_TEST(gate.ne[2] == 8);  // [E, out, in] stacked

    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);
    BOOST_TEST(contains(v.out, "PASSED: 48 of 48"), v.out);

    // kt's LLAMAFILE can serve the experts: the types its kernels multiply, 256-aligned intermediate size.
    auto kt = run_moequant({"verify", "--source", src.string(), "--converted", out.string(), "--for", "kt-llamafile"});
    BOOST_TEST(kt.exit_code == 0, kt.out << kt.err);
    BOOST_TEST(contains(kt.out, "kt-kernel LLAMAFILE: usable"), kt.out);

    // inspect summarises the folder as the converted output it is.
    auto inspected = run_moequant({"inspect", out.string()});
    BOOST_TEST(inspected.exit_code == 0, inspected.err);
    BOOST_TEST(contains(inspected.out, "converted output: gguf"), inspected.out);
    BOOST_TEST(contains(inspected.out, "stored expert matrices: 48 (2 MoE layer(s), 8 expert(s) each)"), inspected.out);
    BOOST_TEST(contains(inspected.out, "gguf.architecture: qwen3moe"), inspected.out);
    BOOST_TEST(contains(inspected.out, "runtime checks: kt-llamafile"), inspected.out);
    // Given by its file, the model is its first part and the siblings (a_gguf_model_is_read_by_its_file_name).
    auto first_part = run_moequant({"inspect", (out / "model-00001-of-00003.gguf").string()});
    BOOST_TEST(first_part.exit_code == 0, first_part.err);
    BOOST_TEST(contains(first_part.out, "files: 3,"), first_part.out);
    auto one_part = run_moequant({"inspect", (out / "model-00002-of-00003.gguf").string()});
    BOOST_TEST(one_part.exit_code == 3);
    BOOST_TEST(contains(one_part.err, "is part 2 of 3 of a split GGUF"), one_part.err);

    // A rerun keeps the parts, byte for byte.
    const auto before = read_bytes(out / "model-00002-of-00003.gguf");
    auto again = run_moequant(gguf_args(src, out, {"--quant-method", "Q4_K_M"}));
    BOOST_TEST(again.exit_code == 0, again.err);
    BOOST_TEST((read_bytes(out / "model-00002-of-00003.gguf") == before));

    // --dry-run names the same files with their sizes.
    auto dry = run_moequant({"convert", "-i", src.string(), "-o", (dir / "dry").string(), "--format", "gguf", "--quant-method",
                             "Q4_K_M", "--dry-run"});
    BOOST_TEST(dry.exit_code == 0, dry.err);
    for (const char* part : {"model-00001-of-00003.gguf", "model-00002-of-00003.gguf", "model-00003-of-00003.gguf"})
        BOOST_TEST(contains(dry.out, std::string(part)), dry.out);
    std::string size = std::to_string(fs::file_size(out / "model-00002-of-00003.gguf"));  // printed with thousands separators
    for (int at = static_cast<int>(size.size()) - 3; at > 0; at -= 3) size.insert(static_cast<std::size_t>(at), ",");
    BOOST_TEST(contains(dry.out, size + " bytes"), dry.out);
}

// Packed: one model.gguf, or gguf-split parts by size or tensor count, hold the very tensors of
// the per-layer parts (the layers' experts staged, then copied), in model order; the staging
// files go; a run killed after a layer resumes from its staged experts.
BOOST_AUTO_TEST_CASE(single_file_and_split_max_size_hold_the_same_tensors) {
    TempDir dir;
    const fs::path src = dir / "src", layers = dir / "layers";
    synth_and_convert(src, layers, {"qwen3_moe", "bf16"}, {"--quant-method", "Q4_K_M"});
    // name -> bytes, over every .gguf of a folder; and that nothing else but the manifest is left.
    auto tensors_of = [](const fs::path& folder) {
        std::map<std::string, std::vector<std::uint8_t>> out;
        for (const auto& entry : fs::directory_iterator(folder)) {
            const std::string name = entry.path().filename().string();
            if (name == "moequant-run.json") continue;
            BOOST_TEST(entry.path().extension() == ".gguf", "left in the output: " << name);
            for (const auto& t : read_gguf_file_header(entry.path().string()).tensors)
                out[t.name] = tensor_data(entry.path(), t.name).bytes;
        }
        return out;
    };
    const auto reference = tensors_of(layers);
    BOOST_REQUIRE_EQUAL(reference.size(), 27u);

    const fs::path single = dir / "single";
    auto r = run_moequant(gguf_args(src, single, {"--quant-method", "Q4_K_M", "--single-file"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST((tensors_of(single) == reference));
    const GgufFile one = read_gguf_file_header((single / "model.gguf").string());
    BOOST_TEST(!one.find("split.count"));  // one file, as llama-quantize writes it
    BOOST_TEST(one.find("general.architecture")->as_string().value() == "qwen3moe");
    BOOST_TEST(one.tensors.front().name == "token_embd.weight");
    BOOST_TEST(one.tensors.back().name == "output_norm.weight");
    BOOST_TEST(one.tensors[std::size_t{1}].name.rfind("blk.0.", 0) == 0u);
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", single.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);
    BOOST_TEST(contains(v.out, "PASSED: 48 of 48"), v.out);
    auto dry = run_moequant({"convert", "-i", src.string(), "-o", (dir / "dry").string(), "--format", "gguf", "--quant-method",
                             "Q4_K_M", "--single-file", "--dry-run"});
    std::string size = std::to_string(fs::file_size(single / "model.gguf"));
    for (int at = static_cast<int>(size.size()) - 3; at > 0; at -= 3) size.insert(static_cast<std::size_t>(at), ",");
    BOOST_TEST(contains(dry.out, "model.gguf"), dry.out);
    BOOST_TEST(contains(dry.out, size + " bytes"), dry.out);
    BOOST_TEST(contains(dry.out, "model-layer-00001.staged"), dry.out);  // on disk at the peak
    BOOST_TEST(contains(dry.out, "(staged: removed at the end)"), dry.out);
    BOOST_TEST(contains(dry.out, "at the peak (2 of them staged)"), dry.out);

    // By size, with gguf-split's rule: a part ends before the tensor that would take its data past the bound.
    const fs::path sized = dir / "sized";
    const std::uint64_t bound = 300000;
    r = run_moequant(gguf_args(src, sized, {"--quant-method", "Q4_K_M", "--split-max-size", "300K"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST((tensors_of(sized) == reference));
    std::size_t parts = 0;
    for (const auto& entry : fs::directory_iterator(sized)) parts += entry.path().extension() == ".gguf";
    BOOST_REQUIRE_GT(parts, 2u);
    std::size_t counted = 0;
    for (std::size_t i = 0; i < parts; ++i) {
        const GgufFile part = read_gguf_file_header((sized / part_name(i + 1, parts)).string());
        BOOST_TEST(part.find("split.no")->as_unsigned().value() == i);
        BOOST_TEST(part.find("split.count")->as_unsigned().value() == parts);
        BOOST_TEST(part.find("split.tensors.count")->as_signed().value() == 27);
        BOOST_TEST(bool(part.find("general.architecture")) == (i == 0));
        std::uint64_t data = 0;
        for (const auto& t : part.tensors) data += (t.bytes + 31) / 32 * 32;
        BOOST_TEST((data <= bound || part.tensors.size() == 1u), "part " << i << " holds " << data << " bytes of data");
        counted += part.tensors.size();
    }
    BOOST_TEST(counted == 27u);
    r = run_moequant(gguf_args(src, dir / "counted", {"--quant-method", "Q4_K_M", "--split-max-tensors", "10"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST(read_gguf_file_header((dir / "counted" / part_name(3, 3)).string()).tensors.size() == 7u);

    // Killed after its first layer, the run leaves that layer's staged experts and resumes from them.
    const fs::path killed = dir / "killed";
    auto k = run_moequant(gguf_args(src, killed, {"--quant-method", "Q4_K_M", "--single-file"}), {"MOEQUANT_TEST_KILL_RANK=0:1"});
    BOOST_TEST(k.exit_code != 0);
    BOOST_TEST(fs::exists(killed / "model-layer-00000.staged"));
    BOOST_TEST(!fs::exists(killed / "model.gguf"));
    std::vector<std::string> resumed_args = gguf_args(src, killed, {"--quant-method", "Q4_K_M", "--single-file"});
    std::erase(resumed_args, std::string("--quiet"));
    auto resumed = run_moequant(resumed_args);
    BOOST_TEST(resumed.exit_code == 0, resumed.err);
    BOOST_TEST(contains(resumed.out, "kept 1 completed earlier"), resumed.out);
    BOOST_TEST((tensors_of(killed) == reference));

    // Bad bounds are usage errors, before any file.
    for (const std::vector<std::string>& bad : {std::vector<std::string>{"--split-max-size", "0"}, {"--split-max-size", "5X"},
                                               {"--split-max-tensors", "-1"}, {"--single-file", "--split-max-size", "1G"}}) {
        std::vector<std::string> extra = {"--quant-method", "Q4_K_M"};
        extra.insert(extra.end(), bad.begin(), bad.end());
        auto refused = run_moequant(gguf_args(src, dir / "refused", extra));
        BOOST_TEST(refused.exit_code == 2, bad[1] << ": " << refused.err);
        BOOST_TEST(!fs::exists(dir / "refused" / "model.gguf"));
    }
}

// DeepSeek-V3 as llama.cpp's deepseek2: MLA tensors (attn_kv_b whole), the dense first layer,
// shared experts, the router's correction bias, the yarn keys; verify decodes every expert.
BOOST_AUTO_TEST_CASE(deepseek_v3_becomes_deepseek2) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out";
    synth_checkpoint(src, {"deepseek_v3", "fp8"});  // FP8 experts and attention: decoded on the way
    auto r = run_moequant(gguf_args(src, out, {"--quant-method", "Q4_K_M"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const GgufFile first = read_gguf_file_header((out / "model-00001-of-00003.gguf").string());
    BOOST_TEST(first.find("general.architecture")->as_string().value() == "deepseek2");
    BOOST_TEST(first.find("deepseek2.leading_dense_block_count")->as_unsigned().value() == 1u);
    BOOST_TEST(first.find("deepseek2.expert_gating_func")->as_unsigned().value() == 2u);  // sigmoid
    BOOST_TEST(first.find("deepseek2.expert_weights_scale")->as_float().value() == 2.5);
    // Group-limited routing (n_group 2, topk_group 1), which llama.cpp reads since 2025-10.
    BOOST_TEST(first.find("deepseek2.expert_group_count")->as_unsigned().value() == 2u);
    BOOST_TEST(first.find("deepseek2.expert_group_used_count")->as_unsigned().value() == 1u);
    BOOST_TEST(first.find("deepseek2.expert_count")->as_unsigned().value() == 8u);
    BOOST_TEST(first.find("deepseek2.rope.scaling.type")->as_string().value() == "yarn");
    // Today's MLA layout: one KV head of kv_lora (+ rope) values; the heads' own dims in *_mla.
    BOOST_TEST(first.find("deepseek2.attention.head_count_kv")->as_unsigned().value() == 1u);
    BOOST_TEST(first.find("deepseek2.attention.key_length")->as_unsigned().value() == 160u);    // kv_lora + rope
    BOOST_TEST(first.find("deepseek2.attention.value_length")->as_unsigned().value() == 128u);  // kv_lora
    BOOST_TEST(first.find("deepseek2.attention.key_length_mla")->as_unsigned().value() == 64u);  // nope + rope
    BOOST_TEST(first.find("deepseek2.attention.value_length_mla")->as_unsigned().value() == 32u);
    BOOST_TEST(first.find("tokenizer.ggml.pre")->as_string().value() == "deepseek-v3");
    const auto types = tensor_types(out, 3);
    using namespace ggml_type_id;
    BOOST_TEST(types.at("blk.1.exp_probs_b.bias") == f32);
    BOOST_TEST(types.at("blk.1.ffn_gate_shexp.weight") == q4_k);
    BOOST_TEST(types.at("blk.0.ffn_down.weight") == q5_0);    // rows of 320: Q4_K falls back
    BOOST_TEST(!types.count("blk.0.attn_kv_b.weight"));       // split:
    BOOST_TEST(types.at("blk.0.attn_k_b.weight") == q5_0);    // rows of nope = 32 values: Q4_K falls back
    BOOST_TEST(types.at("blk.0.attn_v_b.weight") == q5_0);    // rows of kv_lora = 128
    BOOST_TEST(!types.count("blk.3.attn_norm.weight"));       // the MTP layer is not written
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);

    // llama.cpp's path: its converter's BF16 GGUF, then llama-quantize. The FP8 attention comes
    // to the quantizer as its BF16 decode, as the experts do: the rows equal ggml's of the BF16 GGUF's.
    auto bf = run_moequant(gguf_args(src, dir / "bf16", {"--quant-method", "BF16"}));
    BOOST_REQUIRE_MESSAGE(bf.exit_code == 0, bf.err);
    for (const char* name : {"blk.1.attn_kv_a_mqa.weight", "blk.2.attn_q_a.weight", "blk.0.attn_output.weight", "blk.1.attn_k_b.weight",
                             "blk.1.attn_v_b.weight"}) {
        const auto quantized = tensor_data(out / "model-00001-of-00003.gguf", name);
        const auto bf16_rows = tensor_data(dir / "bf16" / "model-00001-of-00003.gguf", name);
        BOOST_TEST((quantized.bytes == ggml_rows_from_bf16(bf16_rows, quantized.info)), name);
    }

    // --legacy-mla: attn_kv_b whole, as the converter wrote it before 2025-04 (c392e509 loads only
    // this); the split tensors are its rows per head, k_b transposed.
    auto legacy = run_moequant(gguf_args(src, dir / "legacy", {"--quant-method", "BF16", "--legacy-mla"}));
    BOOST_REQUIRE_MESSAGE(legacy.exit_code == 0, legacy.err);
    const GgufFile old_first = read_gguf_file_header((dir / "legacy" / "model-00001-of-00003.gguf").string());
    BOOST_TEST(old_first.find("deepseek2.attention.key_length")->as_unsigned().value() == 64u);
    BOOST_TEST(old_first.find("deepseek2.attention.head_count_kv")->as_unsigned().value() == 2u);
    BOOST_TEST(!old_first.find("deepseek2.attention.key_length_mla"));
    const auto kv_b = tensor_data(dir / "legacy" / "model-00001-of-00003.gguf", "blk.0.attn_kv_b.weight");  // [2 x (32 + 32), 128]
    const auto k_b = tensor_data(dir / "bf16" / "model-00001-of-00003.gguf", "blk.0.attn_k_b.weight");      // [2, 128, 32]
    const auto v_b = tensor_data(dir / "bf16" / "model-00001-of-00003.gguf", "blk.0.attn_v_b.weight");      // [2, 32, 128]
    BOOST_TEST((k_b.info.ne == std::vector<std::int64_t>{32, 128, 2}));
    BOOST_TEST((v_b.info.ne == std::vector<std::int64_t>{128, 32, 2}));
    auto bf16_at = [](const TensorData& t, std::size_t i) { return std::pair{t.bytes[2 * i], t.bytes[2 * i + 1]}; };
    std::size_t k_mismatch = 0, v_mismatch = 0;
    for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t row = 0; row < 64; ++row)
            for (std::size_t c = 0; c < 128; ++c) {
                const auto value = bf16_at(kv_b, (h * 64 + row) * 128 + c);
                if (row < 32) k_mismatch += bf16_at(k_b, (h * 128 + c) * 32 + row) != value;
                else v_mismatch += bf16_at(v_b, (h * 32 + (row - 32)) * 128 + c) != value;
            }
    BOOST_TEST(k_mismatch == 0u);
    BOOST_TEST(v_mismatch == 0u);
}

// Qwen3.5-MoE as llama.cpp's qwen35moe (Qwen3_5MoeTextModel): Qwen3-Next's tensors from its
// split projections, the value heads reordered from grouped by key head to tiled
// (_reorder_v_heads: [k][v/k][d] -> [v/k][k][d]) in the rows of in_proj_qkv's v part, in_proj_z,
// in_proj_a/b and the conv1d's v channels, the columns of out_proj and the elements of A_log and
// dt_bias; the M-RoPE sections; no vision tower, no MTP layer.

// The F16 preset of an FP8 source: each expert value is the float32 decode (E4M3 code times its
// block's float scale) rounded once to F16, as the converter's --outtype f16 writes it from the
// float32 dequantization. A BF16 rounding first would change most of them (1.86 M of 2.10 M).
BOOST_AUTO_TEST_CASE(f16_of_fp8_experts_rounds_the_float32_decode_once) {
    BOOST_TEST(f16_round(1.0f) == 0x3C00u);
    BOOST_TEST(f16_round(1.0f + 0x1p-11f) == 0x3C00u);  // a tie goes to the even neighbour
    BOOST_TEST(f16_round(1.0f + 0x3p-11f) == 0x3C02u);
    BOOST_TEST(f16_round(-65504.0f) == 0xFBFFu);
    BOOST_TEST(f16_round(0x1p-24f) == 0x0001u);
    BOOST_TEST(f16_round(0x1.fffp-15f) == 0x0400u);  // carries into the smallest normal

    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out";
    synth_checkpoint(src, {"deepseek_v3", "fp8"});
    auto r = run_moequant(gguf_args(src, out, {"--quant-method", "F16"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const Checkpoint source = Checkpoint::open(src);
    std::size_t values = 0, equal = 0, bf16_first_differs = 0;
    for (std::size_t part = 2; part <= 3; ++part) {
        const fs::path file = out / part_name(part, 3);
        const std::int64_t layer = static_cast<std::int64_t>(part) - 1;  // parts 2 and 3 hold MoE layers 1 and 2
        for (const auto& [gguf, hf] : {std::pair{"ffn_gate_exps", "gate_proj"}, {"ffn_down_exps", "down_proj"}}) {
            const TensorData stacked = tensor_data(file, "blk." + std::to_string(layer) + "." + gguf + ".weight");
            BOOST_REQUIRE(stacked.info.type == ggml_type_id::f16);
            const std::int64_t cols = stacked.info.ne[0], rows = stacked.info.ne[1], experts = stacked.info.ne[2];
            for (std::int64_t e = 0; e < experts; ++e) {
                const std::string name = "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(e) + "." + hf + ".weight";
                const TensorView codes = source.view(name), scales = source.view(name + "_scale_inv");
                BOOST_REQUIRE(codes.shape == (Shape{rows, cols}));
                const std::int64_t scale_cols = scales.shape[1];
                const auto* code = reinterpret_cast<const std::uint8_t*>(codes.data());
                const auto* scale = reinterpret_cast<const float*>(scales.data());
                for (std::int64_t row = 0; row < rows; ++row)
                    for (std::int64_t c = 0; c < cols; ++c) {
                        const float decoded = e4m3(code[row * cols + c]) * scale[(row / 128) * scale_cols + c / 128];
                        const std::size_t at = static_cast<std::size_t>(((e * rows + row) * cols + c) * 2);
                        const auto stored = static_cast<std::uint16_t>(stacked.bytes[at] | stacked.bytes[at + 1] << 8);
                        ++values;
                        equal += stored == f16_round(decoded);
                        bf16_first_differs += f16_round(bf16_value(bf16_round(decoded))) != f16_round(decoded);
                    }
            }
        }
    }
    BOOST_TEST(values > 0u);
    BOOST_TEST(equal == values, values - equal << " of " << values << " expert values are not F16(float32 decode)");
    BOOST_TEST(bf16_first_differs > values / 4, bf16_first_differs << " of " << values << " values differ when rounded through BF16");
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);
}
BOOST_AUTO_TEST_CASE(qwen3_5_moe_becomes_qwen35moe_with_tiled_value_heads) {
    TempDir dir;
    const fs::path src = dir / "src", bf = dir / "bf16";
    synth_checkpoint(src, {"qwen3_5_moe", "bf16"});  // 2 key heads, 4 value heads of 32
    auto r = run_moequant(gguf_args(src, bf, {"--quant-method", "BF16"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto text = boost::json::parse(read_text(src / "config.json")).as_object().at("text_config").as_object();
    auto hp = [&](const char* key) { return text.at(key).to_number<std::int64_t>(); };
    const std::int64_t k_heads = hp("linear_num_key_heads"), v_heads = hp("linear_num_value_heads"), k_dim = hp("linear_key_head_dim"),
                       v_dim = hp("linear_value_head_dim"), hidden = hp("hidden_size"), per_k = v_heads / k_heads;
    const fs::path part = bf / part_name(1, static_cast<std::size_t>(hp("num_hidden_layers")) + 1);
    const GgufFile file = read_gguf_file_header(part.string());
    BOOST_TEST(file.find("general.architecture")->as_string().value() == "qwen35moe");
    const GgufValue* sections = file.find("qwen35moe.rope.dimension_sections");
    BOOST_REQUIRE(sections != nullptr);
    BOOST_TEST(sections->count == 4u);
    for (const auto& t : file.tensors) BOOST_TEST(t.name.find("visual") == std::string::npos, t.name);
    // The tiled index of stored value-head index (g, j, w): [j][g][w].
    auto tiled = [&](std::int64_t stored, std::int64_t width) {
        const std::int64_t head = stored / width, w = stored % width, g = head / per_k, j = head % per_k;
        return (j * k_heads + g) * width + w;
    };
    const Checkpoint source = Checkpoint::open(src);
    const std::string L0 = "model.language_model.layers.0.linear_attn.";
    auto rows_of = [&](const std::string& name) {
        const TensorView t = source.view(name);
        const auto* p = reinterpret_cast<const std::uint16_t*>(t.data());
        return std::vector<std::uint16_t>(p, p + t.elements());
    };
    // in_proj_qkv: q and k rows as stored, v rows tiled.
    const auto qkv = rows_of(L0 + "in_proj_qkv.weight");
    std::vector<std::uint16_t> expected(qkv.size());
    const std::int64_t qk = 2 * k_heads * k_dim;
    for (std::int64_t row = 0; row < qk + v_heads * v_dim; ++row) {
        const std::int64_t to = row < qk ? row : qk + tiled(row - qk, v_dim);
        std::copy_n(qkv.begin() + row * hidden, hidden, expected.begin() + to * hidden);
    }
    BOOST_TEST(gguf_bf16(part, *file.tensor("blk.0.attn_qkv.weight")) == expected);
    // out_proj: each row's columns tiled.
    const auto out_proj = rows_of(L0 + "out_proj.weight");
    const std::int64_t cols = v_heads * v_dim;
    std::vector<std::uint16_t> tiled_cols(out_proj.size());
    for (std::int64_t row = 0; row < hidden; ++row)
        for (std::int64_t c = 0; c < cols; ++c) tiled_cols[static_cast<std::size_t>(row * cols + tiled(c, v_dim))] = out_proj[static_cast<std::size_t>(row * cols + c)];
    BOOST_TEST(gguf_bf16(part, *file.tensor("blk.0.ssm_out.weight")) == tiled_cols);
    // A_log: -exp of each value head's entry, tiled.
    const auto a_log = rows_of(L0 + "A_log");
    std::vector<float> ssm_a(a_log.size());
    for (std::size_t h = 0; h < a_log.size(); ++h) {
        float x = 0;
        convert_bf16_to_f32(&a_log[h], &x, 1);
        ssm_a[static_cast<std::size_t>(tiled(static_cast<std::int64_t>(h), 1))] = -std::exp(x);
    }
    const auto stored = tensor_data(part, "blk.0.ssm_a");
    std::vector<float> written(stored.bytes.size() / 4);
    std::memcpy(written.data(), stored.bytes.data(), stored.bytes.size());
    BOOST_TEST(written == ssm_a, boost::test_tools::per_element());
    BOOST_TEST(per_k == 2);  // so the order above is not the identity
}

// The gated delta-net's and the DSA indexer's shapes are checked against the config before any
// file: a value-head count that does not divide, Qwen3-Next's in_proj_qkvz or Qwen3.5's tensors
// not fitting the head dims, an indexer head llama.cpp would not split right (exit 3, naming the
// config or the tensor).
BOOST_AUTO_TEST_CASE(delta_net_and_indexer_shapes_that_do_not_fit_are_refused) {
    TempDir dir;
    const fs::path next = dir / "next", v32 = dir / "v32", out = dir / "out";
    synth_checkpoint(next, {"qwen3_next", "bf16"});
    synth_checkpoint(v32, {"deepseek_v32", "bf16"});
    auto edited = [&](const fs::path& model, const std::string& from, const std::string& to) {
        std::string text = read_text(model / "config.json");
        BOOST_REQUIRE(text.find(from) != std::string::npos);
        text.replace(text.find(from), from.size(), to);
        write_text(model / "config.json", text);
        return gguf_args(model, out, {"--quant-method", "Q4_K_M"});
    };
    check_refusals({{edited(next, "\"linear_num_value_heads\": 4", "\"linear_num_value_heads\": 3"), 3,
                     "has linear_num_value_heads 3 not a positive multiple of linear_num_key_heads 2"}},
                   out);
    (void)edited(next, "\"linear_num_value_heads\": 3", "\"linear_num_value_heads\": 4");  // back as synthesized
    check_refusals({{edited(next, "\"linear_key_head_dim\": 32", "\"linear_key_head_dim\": 16"), 3,
                     "tensor 'model.layers.0.linear_attn.in_proj_qkvz.weight': has 384 rows"}},
                   out);
    const fs::path q35 = dir / "q35";
    synth_checkpoint(q35, {"qwen3_5_moe", "bf16"});
    check_refusals({{edited(q35, "\"linear_value_head_dim\": 32", "\"linear_value_head_dim\": 16"), 3,
                     "Qwen3.5's gated delta-net needs"}},
                   out);
    check_refusals({{edited(v32, "\"index_head_dim\": 64", "\"index_head_dim\": 48"), 3,
                     "llama.cpp's deepseek32 splits an indexer head correctly only when it is twice the rotary dimension"}},
                   out);
}

// DeepSeek-V3.2 as llama.cpp's deepseek32: deepseek2's MLA (split only) and the DSA indexer's
// keys and tensors, its proj kept F32 by the converter (quantized by llama-quantize's rules).
BOOST_AUTO_TEST_CASE(deepseek_v32_becomes_deepseek32) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out", bf = dir / "bf16";
    synth_and_convert(src, out, {"deepseek_v32", "fp8"}, {"--quant-method", "Q4_K_M"});
    auto config_int = [&](const char* key) { return config_number(src, key); };
    const GgufFile first = read_gguf_file_header((out / "model-00001-of-00003.gguf").string());
    auto u = [&](const std::string& key) { return unsigned_key(first, key); };
    BOOST_TEST(first.find("general.architecture")->as_string().value() == "deepseek32");
    BOOST_TEST(u("deepseek32.block_count") == config_int("num_hidden_layers"));  // no MTP layer
    BOOST_TEST(u("deepseek32.attention.indexer.head_count") == config_int("index_n_heads"));
    BOOST_TEST(u("deepseek32.attention.indexer.key_length") == config_int("index_head_dim"));
    BOOST_TEST(u("deepseek32.attention.indexer.top_k") == config_int("index_topk"));
    BOOST_TEST(u("deepseek32.attention.head_count_kv") == 1u);
    BOOST_TEST(u("deepseek32.attention.key_length_mla") == config_int("qk_nope_head_dim") + config_int("qk_rope_head_dim"));
    BOOST_TEST(!first.find("deepseek2.block_count"));
    const auto types = tensor_types(out, 3);
    using namespace ggml_type_id;
    for (const char* name : {"blk.1.indexer.k_norm.weight", "blk.1.indexer.k_norm.bias"}) BOOST_TEST(types.at(name) == f32, name);
    for (const char* name : {"blk.1.indexer.proj.weight", "blk.1.indexer.attn_k.weight", "blk.1.indexer.attn_q_b.weight", "blk.1.attn_k_b.weight"})
        BOOST_TEST((types.at(name) != f32 && types.at(name) != bf16), name);
    BOOST_TEST(!types.count("blk.1.attn_kv_b.weight"));
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);

    auto b = run_moequant(gguf_args(src, bf, {"--quant-method", "BF16"}));
    BOOST_REQUIRE_MESSAGE(b.exit_code == 0, b.err);
    const GgufFile floats = read_gguf_file_header((bf / "model-00001-of-00003.gguf").string());
    BOOST_TEST(floats.tensor("blk.1.indexer.proj.weight")->type == f32);  // the converter's INDEXER_PROJ
    BOOST_TEST(floats.tensor("blk.1.indexer.attn_k.weight")->type == bf16);
    const auto legacy = run_moequant(gguf_args(src, dir / "legacy", {"--quant-method", "Q4_K_M", "--legacy-mla"}));
    BOOST_TEST(legacy.exit_code == 2, legacy.err);
    BOOST_TEST(contains(legacy.err, "loads only the absorbed MLA layout"), legacy.err);
    BOOST_TEST(!fs::exists(dir / "legacy" / "model-00001-of-00003.gguf"));
}

// GLM-5 as llama.cpp's glm-dsa: deepseek32's keys renamed, the indexer_types as booleans, GLM's
// vocabulary; the shared-indexer layers have no indexer tensors. An indexer head that is not twice
// the rotary dimension (the tiny synth's) is refused: llama.cpp would split it wrongly.
BOOST_AUTO_TEST_CASE(glm5_becomes_glm_dsa) {
    TempDir dir;
    const fs::path src = dir / "src", tiny = dir / "tiny", out = dir / "out";
    synth_checkpoint(src, {"glm_moe_dsa", "bf16"}, {"--preset", "small"});
    auto r = run_moequant(gguf_args(src, out, {"--quant-method", "Q4_K_M"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const std::uint64_t layers = config_number(src, "num_hidden_layers"), dense = config_number(src, "first_k_dense_replace");
    const GgufFile first = read_gguf_file_header((out / part_name(1, layers - dense + 1)).string());
    BOOST_TEST(first.find("general.architecture")->as_string().value() == "glm-dsa");
    BOOST_TEST(first.find("tokenizer.ggml.pre")->as_string().value() == "glm4");
    BOOST_TEST(unsigned_key(first, "glm-dsa.rope.dimension_count") == config_number(src, "qk_rope_head_dim"));
    BOOST_TEST(unsigned_key(first, "glm-dsa.attention.indexer.key_length") == config_number(src, "index_head_dim"));
    const GgufValue* types = first.find("glm-dsa.attention.indexer.types");
    BOOST_REQUIRE(types != nullptr);
    BOOST_TEST((types->element == GgufType::boolean && types->count == layers));
    BOOST_TEST(types->bytes == std::string("\x01\x01\x00\x01\x00\x01", 6));  // "shared" layers reuse the previous top-k
    BOOST_TEST(first.tensor("blk.1.indexer.attn_k.weight") != nullptr);
    BOOST_TEST(first.tensor("blk.2.indexer.attn_k.weight") == nullptr);
    BOOST_TEST(!first.find("deepseek32.block_count"));

    synth_checkpoint(tiny, {"glm_moe_dsa", "bf16"});
    check_refusals({{gguf_args(tiny, dir / "refused", {"--quant-method", "Q4_K_M"}), 3,
                     "splits an indexer head correctly only when it is twice the rotary dimension"}},
                   dir / "refused");
}

// Kimi-K2.6 as the converter writes KimiK25ForConditionalGeneration's text model: deepseek2 with
// the kimi-k2 pre-tokenizer, its weights without "language_model.", its vision tower and
// projector left to the converter's separate mmproj file.
BOOST_AUTO_TEST_CASE(kimi_k26_becomes_deepseek2_without_its_vision_tower) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out";
    synth_and_convert(src, out, {"kimi_k26", "bf16"}, {"--quant-method", "Q4_K_M"});
    const GgufFile first = read_gguf_file_header((out / "model-00001-of-00003.gguf").string());
    BOOST_TEST(first.find("general.architecture")->as_string().value() == "deepseek2");
    BOOST_TEST(first.find("tokenizer.ggml.pre")->as_string().value() == "kimi-k2");
    BOOST_TEST(first.find("deepseek2.rope.scaling.factor")->as_float().value() == 64.0);
    for (const auto& t : first.tensors) {
        BOOST_TEST((t.name.find("vision") == std::string::npos && t.name.find("mm_projector") == std::string::npos), t.name);
        BOOST_TEST(t.name.find("language_model") == std::string::npos, t.name);
    }
    BOOST_TEST(first.tensor("output.weight") != nullptr);  // language_model.lm_head.weight
    BOOST_TEST(first.tensor("blk.1.attn_k_b.weight") != nullptr);
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);
}

// GLM-4.5 as llama.cpp's glm4moe: its norm before the MoE is post_attention_norm, q/k/v with
// biases, DeepSeek's sigmoid router with the correction bias and a shared expert, the dense first
// layer, half the head rotated; GLM's special tokens named by their text; no MTP layer.
BOOST_AUTO_TEST_CASE(glm4_moe_becomes_glm4moe) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out";
    synth_and_convert(src, out, {"glm4_moe", "bf16"}, {"--quant-method", "Q4_K_M"});
    auto config_int = [&](const char* key) { return config_number(src, key); };
    const std::uint64_t layers = config_int("num_hidden_layers");
    const GgufFile first = read_gguf_file_header((out / "model-00001-of-00003.gguf").string());
    auto u = [&](const std::string& key) { return unsigned_key(first, key); };
    BOOST_TEST(first.find("general.architecture")->as_string().value() == "glm4moe");
    BOOST_TEST(u("glm4moe.block_count") == layers);  // the MTP layer is not written
    BOOST_TEST(!first.find("glm4moe.nextn_predict_layers"));
    BOOST_TEST(u("glm4moe.rope.dimension_count") == config_int("head_dim") / 2);  // partial_rotary_factor 0.5
    BOOST_TEST(u("glm4moe.expert_count") == config_int("n_routed_experts"));
    BOOST_TEST(u("glm4moe.expert_shared_count") == 1u);
    BOOST_TEST(u("glm4moe.leading_dense_block_count") == config_int("first_k_dense_replace"));
    BOOST_TEST(u("glm4moe.expert_feed_forward_length") == config_int("moe_intermediate_size"));
    BOOST_TEST(u("glm4moe.expert_gating_func") == 2u);  // sigmoid
    BOOST_TEST(first.find("glm4moe.expert_weights_scale")->as_float().value() == 1.0);
    BOOST_TEST(first.find("glm4moe.expert_weights_norm")->as_bool().value());
    BOOST_TEST(first.find("tokenizer.ggml.pre")->as_string().value() == "glm4");
    const std::vector<std::string> tokens = first.find("tokenizer.ggml.tokens")->as_strings().value();
    BOOST_TEST(tokens.at(u("tokenizer.ggml.bos_token_id")) == "[gMASK]");
    BOOST_TEST(tokens.at(u("tokenizer.ggml.eot_token_id")) == "<|user|>");
    BOOST_TEST(tokens.at(u("tokenizer.ggml.eos_token_id")) == "<|endoftext|>");
    BOOST_TEST(!first.find("tokenizer.ggml.eom_token_id"));  // synth's tokenizer has no <|observation|>

    const auto types = tensor_types(out, 3);
    using namespace ggml_type_id;
    BOOST_TEST(types.at("blk.1.post_attention_norm.weight") == f32);
    BOOST_TEST(!types.count("blk.1.ffn_norm.weight"));
    BOOST_TEST(types.at("blk.1.attn_q.bias") == f32);
    BOOST_TEST(types.at("blk.1.exp_probs_b.bias") == f32);
    BOOST_TEST(types.at("blk.1.ffn_gate_inp.weight") == f32);
    BOOST_TEST(types.count("blk.1.ffn_down_shexp.weight") == 1u);
    BOOST_TEST(types.count("blk.0.ffn_gate.weight") == 1u);  // the dense first layer
    BOOST_TEST(!types.count("blk.0.ffn_gate_exps.weight"));
    BOOST_TEST(types.at("blk.2.ffn_gate_exps.weight") == q4_k);
    for (const auto& [name, type] : types) BOOST_TEST(name.rfind("blk." + std::to_string(layers) + ".", 0) != 0u, name);
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);

    // The non-expert tensors are ggml's rows of the BF16 GGUF's, as llama-quantize makes them.
    auto bf = run_moequant(gguf_args(src, dir / "bf16", {"--quant-method", "BF16"}));
    BOOST_REQUIRE_MESSAGE(bf.exit_code == 0, bf.err);
    for (const char* name : {"blk.1.attn_q.weight", "blk.1.ffn_up_shexp.weight", "blk.0.ffn_down.weight", "output.weight"}) {
        const auto quantized = tensor_data(out / "model-00001-of-00003.gguf", name);
        const auto bf16_rows = tensor_data(dir / "bf16" / "model-00001-of-00003.gguf", name);
        BOOST_TEST((quantized.bytes == ggml_rows_from_bf16(bf16_rows, quantized.info)), name);
    }
}

// MiniMax-M2 as llama.cpp's minimax-m2: q/k norms over the whole projection, the router's
// correction bias beside the gate, sigmoid gating from scoring_func, rotary_dim; no MTP modules.
BOOST_AUTO_TEST_CASE(minimax_m2_becomes_minimax_m2) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out";
    synth_and_convert(src, out, {"minimax_m2", "bf16"}, {"--quant-method", "Q4_K_M"});
    auto config_int = [&](const char* key) { return config_number(src, key); };
    const std::uint64_t layers = config_int("num_hidden_layers");
    const std::string part1 = "model-00001-of-0000" + std::to_string(layers + 1) + ".gguf";
    const GgufFile first = read_gguf_file_header((out / part1).string());
    auto u = [&](const std::string& key) { return unsigned_key(first, key); };
    BOOST_TEST(first.find("general.architecture")->as_string().value() == "minimax-m2");
    BOOST_TEST(u("minimax-m2.block_count") == layers);
    BOOST_TEST(u("minimax-m2.expert_count") == config_int("num_local_experts"));
    BOOST_TEST(u("minimax-m2.expert_feed_forward_length") == config_int("intermediate_size"));
    BOOST_TEST(u("minimax-m2.rope.dimension_count") == config_int("rotary_dim"));
    BOOST_TEST(u("minimax-m2.expert_gating_func") == 2u);  // scoring_func sigmoid
    BOOST_TEST(first.find("tokenizer.ggml.pre")->as_string().value() == "minimax-m2");
    const auto types = tensor_types(out, layers + 1);
    using namespace ggml_type_id;
    const GgufTensorInfo* q_norm = first.tensor("blk.0.attn_q_norm.weight");
    BOOST_REQUIRE(q_norm);
    BOOST_TEST(static_cast<std::uint64_t>(q_norm->ne[0]) == config_int("num_attention_heads") * config_int("head_dim"));
    BOOST_TEST(types.at("blk.0.exp_probs_b.bias") == f32);
    BOOST_TEST(types.at("blk.0.ffn_norm.weight") == f32);
    BOOST_TEST(types.at("blk.0.ffn_gate_exps.weight") == q4_k);
    for (const auto& [name, type] : types) BOOST_TEST(name.rfind("blk." + std::to_string(layers) + ".", 0) != 0u, name);
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);
}

// Qwen3-VL-MoE's text model as llama.cpp's qwen3vlmoe (Qwen3VLMoeTextModel): qwen3moe's keys with
// the M-RoPE sections and the deepstack layer count, its fused experts (layout B) stacked as
// qwen3moe's, `language_model.` dropped, the vision tower left out; a deepstack count llama.cpp
// would abort on is refused.
BOOST_AUTO_TEST_CASE(qwen3_vl_moe_becomes_qwen3vlmoe) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out";
    synth_and_convert(src, out, {"qwen3_vl_moe", "bf16"}, {"--quant-method", "Q4_K_M", "--single-file"});
    const auto config = boost::json::parse(read_text(src / "config.json")).as_object();
    const auto& text = config.at("text_config").as_object();
    const GgufFile file = read_gguf_file_header((out / "model.gguf").string());
    BOOST_TEST(file.find("general.architecture")->as_string().value() == "qwen3vlmoe");
    const auto layers = text.at("num_hidden_layers").to_number<std::uint64_t>();
    BOOST_TEST(unsigned_key(file, "qwen3vlmoe.block_count") == layers);
    BOOST_TEST(unsigned_key(file, "qwen3vlmoe.n_deepstack_layers") == config.at("vision_config").at("deepstack_visual_indexes").as_array().size());
    const GgufValue* sections = file.find("qwen3vlmoe.rope.dimension_sections");
    BOOST_REQUIRE(sections);
    const auto& mrope = text.at("rope_scaling").at("mrope_section").as_array();
    BOOST_TEST((sections->element == GgufType::i32 && sections->count == 4u));
    for (std::size_t i = 0; i < 4; ++i) {
        std::int32_t v = 0;
        std::memcpy(&v, sections->bytes.data() + 4 * i, 4);
        BOOST_TEST(v == (i < mrope.size() ? mrope[i].to_number<std::int32_t>() : 0));
    }
    const std::int64_t experts = text.at("num_experts").to_number<std::int64_t>(), hidden = text.at("hidden_size").to_number<std::int64_t>(),
                       inter = text.at("moe_intermediate_size").to_number<std::int64_t>();
    BOOST_TEST((file.tensor("blk.0.ffn_gate_exps.weight")->ne == std::vector<std::int64_t>{hidden, inter, experts}));
    BOOST_TEST((file.tensor("blk.0.ffn_down_exps.weight")->ne == std::vector<std::int64_t>{inter, hidden, experts}));
    for (const auto& t : file.tensors) BOOST_TEST(t.name.find("visual") == std::string::npos, t.name);
    BOOST_TEST(file.tensor("token_embd.weight") != nullptr);
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);

    auto too_deep = boost::json::parse(read_text(src / "config.json")).as_object();
    boost::json::array all;
    for (std::uint64_t l = 0; l < layers; ++l) all.push_back(static_cast<std::int64_t>(8 * (l + 1)));
    too_deep["vision_config"].as_object()["deepstack_visual_indexes"] = std::move(all);
    write_text(src / "config.json", boost::json::serialize(too_deep));
    check_refusals({{gguf_args(src, dir / "refused", {"--quant-method", "Q4_K_M"}), 3, "llama.cpp's qwen3vlmoe needs fewer than the layers"}},
                   dir / "refused");
}

// MiniMax-M3 as llama.cpp's minimax-m3 (MiniMaxM3Model): M2's keys with the dense layers' length
// as feed_forward_length, the shared expert, the routed scaling and MiniMax Sparse Attention's
// indexer keys; every norm + 1 (Gemma's baked in), the indexer's projections F32 in every preset;
// neither the vision tower nor the MTP module. What llama.cpp would compute otherwise is refused.
BOOST_AUTO_TEST_CASE(minimax_m3_becomes_minimax_m3) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out", bf = dir / "bf16";
    synth_and_convert(src, out, {"minimax_m3", "bf16"}, {"--quant-method", "Q4_K_M", "--single-file"});
    const auto config = boost::json::parse(read_text(src / "config.json")).as_object();
    const auto& text = config.at("text_config").as_object();
    const auto& sparse = text.at("sparse_attention_config").as_object();
    auto number = [](const boost::json::object& o, const char* key) { return static_cast<std::uint64_t>(o.at(key).to_number<std::int64_t>()); };
    const std::uint64_t layers = number(text, "num_hidden_layers");
    const GgufFile file = read_gguf_file_header((out / "model.gguf").string());
    auto u = [&](const std::string& key) { return unsigned_key(file, "minimax-m3." + key); };
    BOOST_TEST(file.find("general.architecture")->as_string().value() == "minimax-m3");
    BOOST_TEST(file.find("tokenizer.ggml.pre")->as_string().value() == "minimax-m2");
    BOOST_TEST(u("block_count") == layers);
    BOOST_TEST(u("feed_forward_length") == number(text, "dense_intermediate_size"));
    BOOST_TEST(u("expert_feed_forward_length") == number(text, "intermediate_size"));
    BOOST_TEST(u("expert_shared_count") == number(text, "n_shared_experts"));
    BOOST_TEST(u("rope.dimension_count") == number(text, "rotary_dim"));
    BOOST_TEST(u("leading_dense_block_count") == 1u);  // moe_layer_freq [0, 1, 1]
    BOOST_TEST(u("expert_gating_func") == 2u);
    BOOST_TEST(u("attention.indexer.head_count") == number(sparse, "sparse_num_index_heads"));
    BOOST_TEST(u("attention.indexer.key_length") == number(sparse, "sparse_index_dim"));
    BOOST_TEST(u("attention.indexer.top_k") == number(sparse, "sparse_topk_blocks"));
    BOOST_TEST(u("attention.indexer.block_size") == number(sparse, "sparse_block_size"));
    BOOST_TEST(u("attention.indexer.local_blocks") == number(sparse, "sparse_local_block"));
    BOOST_TEST(file.find("minimax-m3.expert_weights_scale")->as_float().value() == text.at("routed_scaling_factor").to_number<double>());
    BOOST_TEST(file.find("minimax-m3.expert_weights_norm")->as_bool().value());
    std::map<std::string, std::uint32_t> types;
    for (const auto& t : file.tensors) types[t.name] = t.type;
    using namespace ggml_type_id;
    for (const char* name : {"blk.0.ffn_gate.weight", "blk.0.ffn_down.weight", "blk.1.ffn_gate_shexp.weight", "blk.1.ffn_down_shexp.weight",
                             "blk.1.ffn_gate_exps.weight", "blk.1.attn_q.weight"})
        BOOST_TEST((types.count(name) && types.at(name) != f32 && types.at(name) != bf16 && types.at(name) != f16), name);
    for (const char* name : {"blk.1.indexer.q_proj.weight", "blk.1.indexer.k_proj.weight", "blk.1.indexer.q_norm.weight",
                             "blk.1.indexer.k_norm.weight", "blk.1.exp_probs_b.bias", "blk.0.attn_q_norm.weight"})
        BOOST_TEST((types.count(name) && types.at(name) == f32), name);
    for (const char* name : {"blk.0.indexer.q_proj.weight", "blk.0.ffn_gate_exps.weight", "blk.1.ffn_gate.weight"})
        BOOST_TEST(!types.count(name), name);
    // The language model only: every tensor is a block's of the 3 layers or one of the model's ends.
    for (const auto& [name, type] : types)
        BOOST_TEST((name == "token_embd.weight" || name == "output_norm.weight" || name == "output.weight" ||
                    (name.rfind("blk.", 0) == 0 && std::stoul(name.substr(4)) < layers)),
                   name);
    BOOST_TEST(file.tensor("blk.0.attn_q_norm.weight")->ne[0] == text.at("head_dim").to_number<std::int64_t>());  // per head

    // The converter's BF16 GGUF: the norms + 1 in float32, kept F32.
    auto b = run_moequant(gguf_args(src, bf, {"--quant-method", "BF16", "--single-file"}));
    BOOST_REQUIRE_MESSAGE(b.exit_code == 0, b.err);
    const Checkpoint source = Checkpoint::open(src);
    auto f32_of = [&](const std::string& name) {
        const auto data = tensor_data(bf / "model.gguf", name);
        BOOST_REQUIRE(data.info.type == f32);
        std::vector<float> values(data.bytes.size() / 4);
        std::memcpy(values.data(), data.bytes.data(), data.bytes.size());
        return values;
    };
    auto source_plus = [&](const std::string& name, float add) {
        const TensorView t = source.view(name);
        std::vector<float> values(t.elements());
        convert_bf16_to_f32(t.data(), values.data(), values.size());
        for (float& x : values) x += add;
        return values;
    };
    const std::string L1 = "language_model.model.layers.1.";
    for (const auto& [gguf, weight] : std::vector<std::pair<std::string, std::string>>{
             {"blk.1.attn_norm.weight", L1 + "input_layernorm.weight"},
             {"blk.1.ffn_norm.weight", L1 + "post_attention_layernorm.weight"},
             {"blk.1.attn_k_norm.weight", L1 + "self_attn.k_norm.weight"},
             {"blk.1.indexer.q_norm.weight", L1 + "self_attn.index_q_norm.weight"},
             {"output_norm.weight", "language_model.model.norm.weight"}})
        BOOST_TEST(f32_of(gguf) == source_plus(weight, 1.0f), gguf);
    BOOST_TEST(f32_of("blk.1.indexer.k_proj.weight") == source_plus(L1 + "self_attn.index_k_proj.weight", 0.0f));
    const auto quantized = tensor_data(out / "model.gguf", "blk.1.indexer.q_proj.weight");
    BOOST_TEST((quantized.bytes == tensor_data(bf / "model.gguf", "blk.1.indexer.q_proj.weight").bytes));  // llama-quantize leaves them

    ConfigEdits edited{src, dir.path()};
    check_refusals({{edited("\"swiglu_limit\": 7.0", "\"swiglu_limit\": 8.0"), 3, "computes swigluoai with swiglu_limit 7"},
                    {edited("\"use_gemma_norm\": true", "\"use_gemma_norm\": false"), 3, "bakes Gemma's (1 + w) into every norm"},
                    {edited("\"sparse_num_index_heads\": 1", "\"sparse_num_index_heads\": 2"), 3,
                     "has 2 sparse-attention index heads for 1 key-value heads"},
                    {edited("\"sparse_init_block\": 0", "\"sparse_init_block\": 1"), 3, "forces 1 leading blocks into sparse attention"},
                    {edited("\"shared_intermediate_size\": 256", "\"shared_intermediate_size\": 512"), 3,
                     "loads one or more shared experts of the routed experts' intermediate_size"}},
                   dir / "refused");
}

// Qwen3-Next as llama.cpp's qwen3next, as Qwen3NextModel writes it: the gated delta-net's keys
// and tensors (in_proj_qkvz split into attn_qkv and attn_gate, -exp(A_log), dt_bias, the conv1d
// squeezed), the zero-centred norms + 1 (not the delta-net's own), post_attention_norm, the
// shared expert's gate; no MTP layer. llama-quantize's output holds the gate 1-D (ggml_n_dims).
BOOST_AUTO_TEST_CASE(qwen3_next_becomes_qwen3next) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out", bf = dir / "bf16";
    synth_checkpoint(src, {"qwen3_next", "bf16"});  // tiny: 4 layers, the 4th full attention
    auto r = run_moequant(gguf_args(src, out, {"--quant-method", "Q4_K_M"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto config_int = [&](const char* key) { return config_number(src, key); };
    const std::uint64_t layers = config_int("num_hidden_layers"), k_heads = config_int("linear_num_key_heads"),
                        v_heads = config_int("linear_num_value_heads"), k_dim = config_int("linear_key_head_dim"),
                        v_dim = config_int("linear_value_head_dim"), hidden = config_int("hidden_size");
    const std::string part1 = part_name(1, layers + 1);
    const GgufFile first = read_gguf_file_header((out / part1).string());
    auto u = [&](const std::string& key) { return unsigned_key(first, key); };
    BOOST_TEST(first.find("general.architecture")->as_string().value() == "qwen3next");
    BOOST_TEST(u("qwen3next.block_count") == layers);
    BOOST_TEST(!first.find("qwen3next.nextn_predict_layers"));
    BOOST_TEST(u("qwen3next.expert_feed_forward_length") == config_int("moe_intermediate_size"));
    BOOST_TEST(u("qwen3next.expert_shared_feed_forward_length") == config_int("shared_expert_intermediate_size"));
    BOOST_TEST(u("qwen3next.ssm.conv_kernel") == config_int("linear_conv_kernel_dim"));
    BOOST_TEST(u("qwen3next.ssm.state_size") == k_dim);
    BOOST_TEST(u("qwen3next.ssm.group_count") == k_heads);
    BOOST_TEST(u("qwen3next.ssm.time_step_rank") == v_heads);
    BOOST_TEST(u("qwen3next.ssm.inner_size") == v_dim * v_heads);
    BOOST_TEST(u("qwen3next.full_attention_interval") == config_int("full_attention_interval"));
    BOOST_TEST(u("qwen3next.rope.dimension_count") == config_int("head_dim") / 4);  // partial_rotary_factor 0.25
    const auto types = tensor_types(out, layers + 1);
    using namespace ggml_type_id;
    for (const char* name : {"blk.0.ssm_a", "blk.0.ssm_dt.bias", "blk.0.ssm_conv1d.weight", "blk.0.ssm_norm.weight",
                             "blk.0.post_attention_norm.weight", "blk.0.ffn_gate_inp_shexp.weight", "blk.3.attn_q_norm.weight"})
        BOOST_TEST(types.at(name) == f32, name);
    for (const char* name : {"blk.0.attn_qkv.weight", "blk.0.attn_gate.weight", "blk.0.ssm_out.weight", "blk.3.attn_q.weight"})
        BOOST_TEST((types.at(name) != f32 && types.at(name) != bf16), name);
    BOOST_TEST(!types.count("blk.0.attn_q.weight"));  // a delta-net layer
    BOOST_TEST(!types.count("blk.3.attn_qkv.weight"));  // the full-attention layer
    BOOST_TEST(!types.count("blk.0.ffn_norm.weight"));
    for (const auto& [name, type] : types) BOOST_TEST(name.rfind("blk." + std::to_string(layers) + ".", 0) != 0u, name);
    BOOST_TEST(first.tensor("blk.0.ffn_gate_inp_shexp.weight")->ne == std::vector<std::int64_t>{static_cast<std::int64_t>(hidden)},
               boost::test_tools::per_element());
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);

    // The converter's BF16 GGUF: every tensor from the source, as modify_tensors makes it.
    auto b = run_moequant(gguf_args(src, bf, {"--quant-method", "BF16"}));
    BOOST_REQUIRE_MESSAGE(b.exit_code == 0, b.err);
    const fs::path part = bf / part1;
    const GgufFile floats = read_gguf_file_header(part.string());
    const Checkpoint source = Checkpoint::open(src);
    const std::string L0 = "model.layers.0.";
    // in_proj_qkvz [k_heads x (q k v z), hidden]: torch's permute, view(hidden, k_heads, -1), split, cat.
    const TensorView qkvz = source.view(L0 + "linear_attn.in_proj_qkvz.weight");
    const auto* in = reinterpret_cast<const std::uint16_t*>(qkvz.data());
    const std::uint64_t per_k = v_heads / k_heads * v_dim, group = 2 * k_dim + 2 * per_k;
    std::vector<std::uint16_t> qkv, gate;
    auto gather = [&](std::vector<std::uint16_t>& to, std::uint64_t from, std::uint64_t width) {
        for (std::uint64_t h = 0; h < k_heads; ++h)
            for (std::uint64_t j = 0; j < width; ++j)
                for (std::uint64_t c = 0; c < hidden; ++c) to.push_back(in[(h * group + from + j) * hidden + c]);
    };
    gather(qkv, 0, k_dim);
    gather(qkv, k_dim, k_dim);
    gather(qkv, 2 * k_dim, per_k);
    gather(gate, 2 * k_dim + per_k, per_k);
    BOOST_TEST(gguf_bf16(part, *floats.tensor("blk.0.attn_qkv.weight")) == qkv);
    BOOST_TEST(gguf_bf16(part, *floats.tensor("blk.0.attn_gate.weight")) == gate);
    BOOST_TEST(qkv != std::vector<std::uint16_t>(in, in + qkv.size()));  // reordered, not a prefix
    BOOST_TEST(floats.tensor("blk.0.ffn_gate_inp_shexp.weight")->ne.size() == 2u);  // the converter's [1, hidden]
    auto f32_of = [&](const std::string& name) {
        const auto data = tensor_data(part, name);
        std::vector<float> values(data.bytes.size() / 4);
        std::memcpy(values.data(), data.bytes.data(), data.bytes.size());
        return values;
    };
    auto source_floats = [&](const std::string& name) {
        const TensorView t = source.view(name);
        std::vector<float> values(t.elements());
        convert_bf16_to_f32(t.data(), values.data(), values.size());
        return values;
    };
    auto mapped = [](std::vector<float> x, float (*f)(float)) {
        std::transform(x.begin(), x.end(), x.begin(), f);
        return x;
    };
    auto plus_one = [](float x) { return x + 1.0f; };
    auto minus_exp = [](float x) { return -std::exp(x); };
    auto as_is = [](float x) { return x; };
    BOOST_TEST(f32_of("blk.0.ssm_a") == mapped(source_floats(L0 + "linear_attn.A_log"), minus_exp), boost::test_tools::per_element());
    BOOST_TEST(f32_of("blk.0.ssm_dt.bias") == mapped(source_floats(L0 + "linear_attn.dt_bias"), as_is), boost::test_tools::per_element());
    BOOST_TEST(f32_of("blk.0.ssm_conv1d.weight") == source_floats(L0 + "linear_attn.conv1d.weight"));
    BOOST_TEST(floats.tensor("blk.0.ssm_conv1d.weight")->ne ==
                   (std::vector<std::int64_t>{static_cast<std::int64_t>(config_int("linear_conv_kernel_dim")), static_cast<std::int64_t>(2 * k_dim * k_heads + v_dim * v_heads)}),
               boost::test_tools::per_element());
    BOOST_TEST(f32_of("blk.0.ssm_norm.weight") == source_floats(L0 + "linear_attn.norm.weight"));  // no + 1
    BOOST_TEST(f32_of("blk.0.attn_norm.weight") == mapped(source_floats(L0 + "input_layernorm.weight"), plus_one));
    BOOST_TEST(f32_of("blk.0.post_attention_norm.weight") == mapped(source_floats(L0 + "post_attention_layernorm.weight"), plus_one));
    BOOST_TEST(f32_of("blk.3.attn_k_norm.weight") == mapped(source_floats("model.layers.3.self_attn.k_norm.weight"), plus_one));
    BOOST_TEST(f32_of("output_norm.weight") == mapped(source_floats("model.norm.weight"), plus_one));

    // The quantized ones are ggml's rows of those, as llama-quantize makes them.
    for (const char* name : {"blk.0.attn_qkv.weight", "blk.0.attn_gate.weight", "blk.0.ssm_out.weight", "blk.3.attn_q.weight"}) {
        const auto quantized = tensor_data(out / part1, name);
        BOOST_TEST((quantized.bytes == ggml_rows_from_bf16(tensor_data(part, name), quantized.info)), name);
    }
}

// Mixtral as llama.cpp's llama, as convert_hf_to_gguf.py's LlamaModel writes it: its keys, the
// llama vocabulary from tokenizer.json (LlamaHfVocab), the router as ffn_gate_inp, and attn_q /
// attn_k with their rows in llama's rotary order (BF16 from a BF16 source: bit for bit).
BOOST_AUTO_TEST_CASE(mixtral_becomes_llama_with_permuted_q_and_k) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out", bf = dir / "bf16";
    synth_checkpoint(src, {"mixtral", "bf16"});  // tiny: 4 heads of 64, 1 KV head, 4 experts, 2 layers
    auto r = run_moequant(gguf_args(src, out, {"--quant-method", "Q4_K_M"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const GgufFile first = read_gguf_file_header((out / "model-00001-of-00003.gguf").string());
    auto u32 = [&](const char* key) { return first.find(key) ? first.find(key)->as_unsigned().value_or(0) : 0; };
    BOOST_TEST(first.find("general.architecture")->as_string().value() == "llama");
    BOOST_TEST(u32("llama.block_count") == 2u);
    BOOST_TEST(u32("llama.context_length") == 32768u);
    BOOST_TEST(u32("llama.embedding_length") == 256u);
    BOOST_TEST(u32("llama.feed_forward_length") == 256u);
    BOOST_TEST(u32("llama.attention.head_count") == 4u);
    BOOST_TEST(u32("llama.attention.head_count_kv") == 1u);
    BOOST_TEST(u32("llama.expert_count") == 4u);  // num_local_experts
    BOOST_TEST(u32("llama.expert_used_count") == 2u);
    BOOST_TEST(u32("llama.vocab_size") == 512u);
    BOOST_TEST(u32("llama.rope.dimension_count") == 64u);  // hidden / heads
    BOOST_TEST(first.find("llama.rope.freq_base")->as_float().value() == 1e6);
    BOOST_TEST((first.find("llama.attention.layer_norm_rms_epsilon")->type == GgufType::f32));
    BOOST_TEST(!first.find("llama.expert_feed_forward_length"));
    BOOST_TEST(!first.find("llama.rope.scaling.type"));
    BOOST_TEST(first.find("tokenizer.ggml.model")->as_string().value() == "llama");
    BOOST_TEST(first.find("tokenizer.ggml.pre")->as_string().value() == "default");
    BOOST_TEST(!first.find("tokenizer.ggml.merges"));
    const GgufValue* scores = first.find("tokenizer.ggml.scores");
    BOOST_TEST_REQUIRE(scores != nullptr);
    BOOST_TEST((scores->element == GgufType::f32 && scores->count == 512u));
    const auto tokens = first.find("tokenizer.ggml.tokens")->as_strings().value();
    BOOST_TEST(tokens.size() == 512u);
    BOOST_TEST(tokens[13] == "<0x0A>");
    BOOST_TEST(u32("tokenizer.ggml.bos_token_id") == 1u);
    BOOST_TEST(u32("tokenizer.ggml.eos_token_id") == 2u);
    BOOST_TEST(u32("tokenizer.ggml.unknown_token_id") == 0u);
    BOOST_TEST(first.find("tokenizer.ggml.add_bos_token")->as_bool().value() == true);

    std::vector<std::string> names;
    for (const auto& t : first.tensors) names.push_back(t.name);
    std::sort(names.begin(), names.end());
    std::vector<std::string> expected = {"output.weight", "output_norm.weight", "token_embd.weight"};
    for (const char* L : {"0", "1"})
        for (const char* t : {"attn_k", "attn_norm", "attn_output", "attn_q", "attn_v", "ffn_gate_inp", "ffn_norm"})
            expected.push_back(std::string("blk.") + L + "." + t + ".weight");
    std::sort(expected.begin(), expected.end());
    BOOST_TEST(names == expected, boost::test_tools::per_element());
    const auto types = tensor_types(out, 3);
    using namespace ggml_type_id;
    BOOST_TEST(types.at("blk.0.ffn_gate_exps.weight") == q4_k);
    BOOST_TEST(types.at("blk.1.ffn_down_exps.weight") == q6_k);
    BOOST_TEST(types.at("blk.0.ffn_gate_inp.weight") == f32);
    BOOST_TEST(types.at("blk.0.attn_q.weight") == q4_k);
    BOOST_TEST(types.at("output.weight") == q6_k);
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);

    auto b = run_moequant(gguf_args(src, bf, {"--quant-method", "BF16"}));
    BOOST_REQUIRE_MESSAGE(b.exit_code == 0, b.err);
    const fs::path part = bf / "model-00001-of-00003.gguf";
    const GgufFile floats = read_gguf_file_header(part.string());
    const Checkpoint source = Checkpoint::open(src);
    for (const char* L : {"0", "1"}) {
        const std::string layer = std::string("model.layers.") + L + ".self_attn.";
        const TensorView q = source.view(layer + "q_proj.weight"), k = source.view(layer + "k_proj.weight");
        BOOST_TEST(gguf_bf16(part, *floats.tensor(std::string("blk.") + L + ".attn_q.weight")) == llama_permuted(q, 4));
        BOOST_TEST(gguf_bf16(part, *floats.tensor(std::string("blk.") + L + ".attn_k.weight")) == llama_permuted(k, 1));  // n_kv_head
        const TensorView v_proj = source.view(layer + "v_proj.weight");
        const auto* raw = reinterpret_cast<const std::uint16_t*>(v_proj.data());
        BOOST_TEST(gguf_bf16(part, *floats.tensor(std::string("blk.") + L + ".attn_v.weight")) ==
                   std::vector<std::uint16_t>(raw, raw + v_proj.elements()));  // v as it is
    }
    BOOST_TEST(llama_permuted(source.view("model.layers.0.self_attn.q_proj.weight"), 4) !=
               gguf_bf16(part, *floats.tensor("blk.0.attn_v.weight")));
}

// What llama.cpp's llama cannot compute is refused naming the config key: rope scaling other
// than linear, a sliding window shorter than the context.
BOOST_AUTO_TEST_CASE(mixtral_rope_scaling_and_sliding_window) {
    TempDir dir;
    const fs::path src = dir / "src";
    synth_checkpoint(src, {"mixtral", "bf16"});
    const std::string config = read_text(src / "config.json");
    auto with = [&](const std::string& from, const std::string& to) {
        std::string text = config;
        text.replace(text.find(from), from.size(), to);
        write_text(src / "config.json", text);
    };
    auto keys_of = [&](const char* name, const std::string& rope) {
        with("\"sliding_window\": null", "\"sliding_window\": null, " + rope);
        auto r = run_moequant(gguf_args(src, dir / name, {"--quant-method", "Q8_0"}));
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return read_gguf_file_header((dir / name / "model-00001-of-00003.gguf").string());
    };
    const GgufFile linear = keys_of("linear", "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}");
    BOOST_TEST(linear.find("llama.rope.scaling.type")->as_string().value() == "linear");
    BOOST_TEST(linear.find("llama.rope.scaling.factor")->as_float().value() == 2.0);
    // TextModel's yarn keys, beta_fast/slow included (Kimi-K2's 1.0 is not llama.cpp's default 32).
    const GgufFile yarn = keys_of("yarn", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                                          "\"original_max_position_embeddings\": 8192, \"beta_fast\": 1.0, \"beta_slow\": 1.0}");
    BOOST_TEST(yarn.find("llama.rope.scaling.type")->as_string().value() == "yarn");
    BOOST_TEST(yarn.find("llama.rope.scaling.factor")->as_float().value() == 4.0);
    BOOST_TEST(yarn.find("llama.rope.scaling.original_context_length")->as_unsigned().value() == 8192u);
    BOOST_TEST(yarn.find("llama.rope.scaling.yarn_beta_fast")->as_float().value() == 1.0);
    BOOST_TEST(yarn.find("llama.rope.scaling.yarn_beta_slow")->as_float().value() == 1.0);
    BOOST_TEST(!yarn.find("llama.rope.scaling.yarn_ext_factor"));
    // transformers v5's rope_parameters: its rope_theta is the base.
    const GgufFile v5 = keys_of("v5", "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 500000.0}");
    BOOST_TEST(v5.find("llama.rope.freq_base")->as_float().value() == 500000.0);
    BOOST_TEST(!v5.find("llama.rope.scaling.type"));

    const fs::path out = dir / "refused";
    with("\"sliding_window\": null", "\"sliding_window\": null, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0}");
    check_refusals({{gguf_args(src, out, {"--quant-method", "Q4_K_M"}), 3, "yarn rope scaling without original_max_position_embeddings"}}, out);
    with("\"sliding_window\": null", "\"sliding_window\": null, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}");
    check_refusals({{gguf_args(src, out, {"--quant-method", "Q4_K_M"}), 3, "rope type 'llama3'"}}, out);
    with("\"sliding_window\": null", "\"sliding_window\": 4096");
    check_refusals({{gguf_args(src, out, {"--quant-method", "Q4_K_M"}), 3, "has sliding_window 4096"}}, out);
}

BOOST_AUTO_TEST_CASE(overrides_and_float_presets) {
    TempDir dir;
    const fs::path src = dir / "src";
    synth_checkpoint(src, {"qwen3_moe", "bf16"});
    auto r = run_moequant(gguf_args(src, dir / "mixed", {"--quant-method", "Q4_K_M", "--tensor-type", "ffn_down_exps=q8_0",
                                                         "--tensor-type", "attn_q=iq4_xs", "--output-tensor-type", "q8_0"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto mixed = tensor_types(dir / "mixed", 3);
    using namespace ggml_type_id;
    BOOST_TEST(mixed.at("blk.0.ffn_down_exps.weight") == q8_0);
    BOOST_TEST(mixed.at("blk.1.ffn_down_exps.weight") == q8_0);
    BOOST_TEST(mixed.at("blk.1.attn_q.weight") == iq4_xs);
    BOOST_TEST(mixed.at("output.weight") == q8_0);
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", (dir / "mixed").string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);

    // MXFP4 (not in kt's type table) and IQ4_NL (not in its kernels) experts: llama.cpp reads them, kt's LLAMAFILE cannot.
    auto mx = run_moequant(gguf_args(src, dir / "mxfp4", {"--quant-method", "MXFP4_MOE", "--tensor-type", "ffn_up_exps=iq4_nl"}));
    BOOST_REQUIRE_MESSAGE(mx.exit_code == 0, mx.err);
    BOOST_TEST(tensor_types(dir / "mxfp4", 3).at("blk.0.ffn_down_exps.weight") == mxfp4);
    auto kt = run_moequant({"verify", "--source", src.string(), "--converted", (dir / "mxfp4").string(), "--for", "kt-llamafile"});
    BOOST_TEST(kt.exit_code != 0, kt.out);
    BOOST_TEST(contains(kt.out, "KtTypes: blk.0.ffn_down_exps.weight is mxfp4"), kt.out);
    BOOST_TEST(contains(kt.out, "is iq4_nl, which kt's llamafile kernels do not multiply (kt's issue #1884)"), kt.out);

    auto bf = run_moequant(gguf_args(src, dir / "bf16", {"--quant-method", "bf16"}));
    BOOST_REQUIRE_MESSAGE(bf.exit_code == 0, bf.err);
    const auto floats = tensor_types(dir / "bf16", 3);
    BOOST_TEST(floats.at("blk.0.ffn_up_exps.weight") == bf16);
    BOOST_TEST(floats.at("blk.0.attn_q_norm.weight") == f32);
    auto vb = run_moequant({"verify", "--source", src.string(), "--converted", (dir / "bf16").string()});
    BOOST_TEST(vb.exit_code == 0, vb.out << vb.err);
    BOOST_TEST(contains(vb.out, "SNR inf dB"), vb.out);  // BF16 experts from a BF16 source: exact
}

// gpt-oss as llama.cpp's gpt-oss (GptOssModel): its keys (the yarn keys before rope.freq_base,
// sliding_window, intermediate_size as the experts'), attn_sinks, the router's bias and the
// experts' biases, gate_up's even values the gate's and its odd ones the up's; the MXFP4 experts
// carried as stored by MXFP4_MOE and the float presets (ggml's blocks re-derived here from the
// release's nibble order), quantized from their values by the other presets.
BOOST_AUTO_TEST_CASE(gpt_oss_keeps_its_mxfp4_experts_and_splits_the_biases) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out";
    synth_checkpoint(src, {"gpt_oss", "mxfp4"});  // tiny: 2 layers, 4 experts of 256, 4 heads of 64, 1 KV head
    auto r = run_moequant(gguf_args(src, out, {"--quant-method", "MXFP4_MOE"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const fs::path part1 = out / "model-00001-of-00003.gguf";
    const GgufFile first = read_gguf_file_header(part1.string());
    auto u = [&](const std::string& key) { return unsigned_key(first, key); };
    auto f = [&](const std::string& key) { return first.find(key)->as_float().value(); };
    BOOST_TEST(first.find("general.architecture")->as_string().value() == "gpt-oss");
    BOOST_TEST(u("general.file_type") == 38u);  // MOSTLY_MXFP4_MOE
    BOOST_TEST(u("gpt-oss.block_count") == 2u);
    BOOST_TEST(u("gpt-oss.attention.sliding_window") == 128u);
    BOOST_TEST(u("gpt-oss.expert_feed_forward_length") == config_number(src, "intermediate_size"));
    BOOST_TEST(u("gpt-oss.expert_count") == 4u);
    BOOST_TEST(u("gpt-oss.expert_used_count") == 2u);
    BOOST_TEST(u("gpt-oss.attention.key_length") == 64u);
    BOOST_TEST(first.find("gpt-oss.rope.scaling.type")->as_string().value() == "yarn");
    BOOST_TEST(f("gpt-oss.rope.scaling.factor") == 32.0);
    BOOST_TEST(u("gpt-oss.rope.scaling.original_context_length") == 4096u);
    BOOST_TEST(f("gpt-oss.rope.scaling.yarn_beta_fast") == 32.0);
    BOOST_TEST(f("gpt-oss.rope.scaling.yarn_beta_slow") == 1.0);
    BOOST_TEST(f("gpt-oss.rope.freq_base") == 150000.0);
    BOOST_TEST(!first.find("gpt-oss.attention.sliding_window_pattern"));  // llama.cpp's default: every other layer
    std::vector<std::string> keys;
    for (const auto& kv : first.metadata) keys.push_back(kv.key);
    auto position = [&](const std::string& key) { return std::find(keys.begin(), keys.end(), key) - keys.begin(); };
    BOOST_TEST(position("gpt-oss.rope.scaling.yarn_beta_slow") + 1 == position("gpt-oss.rope.freq_base"));
    BOOST_TEST(first.find("tokenizer.ggml.model")->as_string().value() == "gpt2");
    BOOST_TEST(first.find("tokenizer.ggml.pre")->as_string().value() == "gpt-4o");

    const auto types = tensor_types(out, 3);
    using namespace ggml_type_id;
    for (const char* t : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
        BOOST_TEST(types.at(std::string("blk.1.") + t + ".weight") == mxfp4, t);
        const GgufTensorInfo* bias = first.tensor(std::string("blk.1.") + t + ".bias");
        BOOST_TEST_REQUIRE(bias != nullptr, t);
        BOOST_TEST((bias->type == f32 && bias->ne == std::vector<std::int64_t>{256, 4}), t);  // {rows, experts}
    }
    for (const char* t : {"attn_sinks.weight", "ffn_gate_inp.bias", "ffn_gate_inp.weight", "attn_output.bias", "attn_q.bias",
                          "post_attention_norm.weight"})
        BOOST_TEST(types.at(std::string("blk.0.") + t) == f32, t);
    BOOST_TEST((first.tensor("blk.0.attn_sinks.weight")->ne == std::vector<std::int64_t>{4}));
    BOOST_TEST(!types.count("blk.0.ffn_norm.weight"));
    for (const char* t : {"blk.0.attn_q.weight", "blk.0.attn_output.weight", "token_embd.weight", "output.weight"})
        BOOST_TEST(types.at(t) == q8_0, t);  // MXFP4_MOE: every other matrix Q8_0
    BOOST_TEST(types.size() == 41u);

    // Each expert's MXFP4 block: the scale byte as stored, then byte j = element j (low nibble) and
    // element j + 16 (high), where the release's byte k holds elements 2k (low) and 2k + 1 (high).
    const Checkpoint source = Checkpoint::open(src);
    const std::string experts = "model.layers.1.mlp.experts.";
    const TensorView blocks = source.view(experts + "gate_up_proj_blocks"), scales = source.view(experts + "gate_up_proj_scales");
    const auto* hf = reinterpret_cast<const std::uint8_t*>(blocks.data());
    const auto* e8m0 = reinterpret_cast<const std::uint8_t*>(scales.data());
    auto nibble = [&](std::int64_t stored_row, std::int64_t element) {
        const std::uint8_t byte = hf[stored_row * 128 + element / 2];
        return element % 2 ? byte >> 4 : byte & 0x0f;
    };
    const fs::path layer1 = out / "model-00003-of-00003.gguf";
    constexpr float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const auto* mxfp4_rows = ggml_quants::ggml_type_named("mxfp4");
    for (std::int64_t half = 0; half < 2; ++half) {  // gate: the even rows of gate_up, up: the odd ones
        const TensorData ours = tensor_data(layer1, half ? "blk.1.ffn_up_exps.weight" : "blk.1.ffn_gate_exps.weight");
        std::vector<std::uint8_t> expected;
        std::vector<float> values, decoded(256);
        for (std::int64_t e = 0; e < 4; ++e)
            for (std::int64_t row = 0; row < 256; ++row) {
                const std::int64_t stored = e * 512 + 2 * row + half;
                for (std::int64_t b = 0; b < 8; ++b) {
                    expected.push_back(e8m0[stored * 8 + b]);
                    for (std::int64_t j = 0; j < 16; ++j)
                        expected.push_back(static_cast<std::uint8_t>(nibble(stored, 32 * b + j) | nibble(stored, 32 * b + j + 16) << 4));
                    for (std::int64_t j = 0; j < 32; ++j) {  // the release's value: E2M1 x 2^(e - 127)
                        const int code = nibble(stored, 32 * b + j);
                        values.push_back((code & 8 ? -1.0f : 1.0f) * e2m1[code & 7] * std::ldexp(1.0f, e8m0[stored * 8 + b] - 127));
                    }
                }
            }
        BOOST_TEST((ours.bytes == expected), half);
        std::vector<float> dequantized;
        for (std::size_t row = 0; row < 4 * 256; ++row) {
            mxfp4_rows->dequantize(ours.bytes.data() + row * mxfp4_rows->row_bytes(256), decoded.data(), 256);
            dequantized.insert(dequantized.end(), decoded.begin(), decoded.end());
        }
        BOOST_TEST((dequantized == values), half);  // ggml's to_float gives the release's values
    }
    // The biases, BF16 in the release, in F32: gate_up's even values the gate's, its odd ones the up's.
    const TensorView gate_up_bias = source.view(experts + "gate_up_proj_bias"), down_bias = source.view(experts + "down_proj_bias");
    const auto* bias_bits = reinterpret_cast<const std::uint16_t*>(gate_up_bias.data());
    for (std::int64_t half = 0; half < 2; ++half) {
        const TensorData ours = tensor_data(part1, half ? "blk.1.ffn_up_exps.bias" : "blk.1.ffn_gate_exps.bias");
        std::vector<float> expected;
        for (std::int64_t i = 0; i < 4 * 256; ++i) expected.push_back(bf16_to_f32(bias_bits[2 * i + half]));
        std::vector<float> got(expected.size());
        std::memcpy(got.data(), ours.bytes.data(), ours.bytes.size());
        BOOST_TEST((got == expected), half);
    }
    std::vector<float> down(4 * 256), got_down(4 * 256);
    convert_bf16_to_f32(down_bias.data(), down.data(), down.size());
    std::memcpy(got_down.data(), tensor_data(part1, "blk.1.ffn_down_exps.bias").bytes.data(), got_down.size() * 4);
    BOOST_TEST((got_down == down));
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);

    // BF16, as the converter writes it: the experts the same MXFP4 bytes, the other matrices BF16.
    auto bf = run_moequant(gguf_args(src, dir / "bf16", {"--quant-method", "BF16"}));
    BOOST_REQUIRE_MESSAGE(bf.exit_code == 0, bf.err);
    const GgufFile floats = read_gguf_file_header((dir / "bf16" / "model-00001-of-00003.gguf").string());
    BOOST_TEST(floats.find("general.file_type")->as_unsigned().value() == 38u);
    BOOST_TEST(floats.tensor("blk.0.attn_q.weight")->type == bf16);
    BOOST_TEST((read_bytes(dir / "bf16" / "model-00003-of-00003.gguf") == read_bytes(layer1)));
    // The experts quantized from their values, as llama-quantize --allow-requantize does, verified
    // against the source: Q8_0, and MXFP4_MOE with some expert tensors in another type, whose
    // MXFP4 tensors are still carried as stored (llama-quantize copies them) and the others
    // quantized from the values.
    const std::pair<const char*, std::vector<std::string>> requantized[] = {
        {"q8_0", {"--quant-method", "Q8_0"}}, {"mixed", {"--quant-method", "MXFP4_MOE", "--tensor-type", "ffn_down_exps=q8_0"}}};
    for (const auto& [name, args] : requantized) {
        auto converted = run_moequant(gguf_args(src, dir / name, args));
        BOOST_REQUIRE_MESSAGE(converted.exit_code == 0, converted.err);
        auto verified = run_moequant({"verify", "--source", src.string(), "--converted", (dir / name).string()});
        BOOST_TEST(verified.exit_code == 0, verified.out << verified.err);
    }
    BOOST_TEST(tensor_types(dir / "q8_0", 3).at("blk.1.ffn_up_exps.weight") == q8_0);
    BOOST_TEST(tensor_types(dir / "mixed", 3).at("blk.1.ffn_down_exps.weight") == q8_0);
    BOOST_TEST(tensor_types(dir / "mixed", 3).at("blk.1.ffn_up_exps.weight") == mxfp4);
    const fs::path mixed_layer1 = dir / "mixed" / "model-00003-of-00003.gguf";
    for (const char* t : {"blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight"})
        BOOST_TEST((tensor_data(mixed_layer1, t).bytes == tensor_data(layer1, t).bytes), t);  // the carried blocks

    // With an importance matrix too: the carried blocks stay as stored, the requantized tensors
    // are weighed (llama-quantize copies MXFP4 and weighs what it converts).
    ImatrixRecord record{.datasets = {"calibration.txt"}, .chunk_count = 1, .chunk_size = 128};
    for (const auto& t : read_gguf_file_header(layer1.string()).tensors) {
        if (t.name.find("_exps.weight") == std::string::npos) continue;
        ImatrixStatistics stats{.name = t.name, .cols = t.ne[0]};
        stats.counts.assign(static_cast<std::size_t>(t.ne[2]), 4.0f);
        for (std::int64_t i = 0; i < t.ne[0] * t.ne[2]; ++i) stats.sums.push_back(0.5f + static_cast<float>(i % 7));
        record.weights.push_back(std::move(stats));
    }
    write_imatrix_gguf(dir / "imatrix.gguf", record);
    auto weighed = run_moequant(gguf_args(src, dir / "weighed", {"--quant-method", "MXFP4_MOE", "--tensor-type", "ffn_down_exps=q4_K", "--imatrix",
                                                                 (dir / "imatrix.gguf").string()}));
    BOOST_REQUIRE_MESSAGE(weighed.exit_code == 0, weighed.err);
    auto unweighed = run_moequant(gguf_args(src, dir / "unweighed", {"--quant-method", "MXFP4_MOE", "--tensor-type", "ffn_down_exps=q4_K"}));
    BOOST_REQUIRE_MESSAGE(unweighed.exit_code == 0, unweighed.err);
    const fs::path weighed_layer1 = dir / "weighed" / "model-00003-of-00003.gguf";
    BOOST_TEST((tensor_data(weighed_layer1, "blk.1.ffn_up_exps.weight").bytes == tensor_data(layer1, "blk.1.ffn_up_exps.weight").bytes));
    BOOST_TEST((tensor_data(weighed_layer1, "blk.1.ffn_down_exps.weight").bytes !=
                tensor_data(dir / "unweighed" / "model-00003-of-00003.gguf", "blk.1.ffn_down_exps.weight").bytes));
}

// A gpt-oss tensor llama.cpp would load in other dims, or layers it would attend otherwise, is
// refused naming the tensor or key.
BOOST_AUTO_TEST_CASE(gpt_oss_shapes_llama_cpp_cannot_load_are_refused) {
    TempDir dir;
    const fs::path src = dir / "src", windows = dir / "windows", out = dir / "refused";
    synth_checkpoint(src, {"gpt_oss", "mxfp4"});
    fs::copy(src, windows, fs::copy_options::recursive);
    auto config = boost::json::parse(read_text(windows / "config.json")).as_object();
    config["layer_types"] = boost::json::array{"full_attention", "full_attention"};
    write_text(windows / "config.json", boost::json::serialize(config));
    // Four sinks stored as [2, 2]: the same bytes, in the dims llama.cpp would not take.
    for (const auto& shard : fs::directory_iterator(src)) {
        if (shard.path().extension() != ".safetensors") continue;
        std::vector<std::uint8_t> bytes = read_bytes(shard.path());
        std::uint64_t n = 0;
        std::memcpy(&n, bytes.data(), 8);
        auto header = boost::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n))).as_object();
        auto* sinks = header.if_contains("model.layers.0.self_attn.sinks");
        if (!sinks) continue;
        sinks->as_object()["shape"] = boost::json::array{2, 2};
        std::string text = boost::json::serialize(header);
        text.append((8 - text.size() % 8) % 8, ' ');
        std::vector<std::uint8_t> rewritten(8);
        const std::uint64_t length = text.size();
        std::memcpy(rewritten.data(), &length, 8);
        rewritten.insert(rewritten.end(), text.begin(), text.end());
        rewritten.insert(rewritten.end(), bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n), bytes.end());
        write_bytes(shard.path(), rewritten);
    }
    check_refusals({
                       {gguf_args(src, out, {"--quant-method", "MXFP4_MOE"}), 3,
                        "tensor 'model.layers.0.self_attn.sinks': would be GGUF blk.0.attn_sinks.weight of dims {2, 2}; llama.cpp "
                        "loads it as {4}"},
                       {gguf_args(windows, out, {"--quant-method", "Q8_0"}), 3, "has layer_types[0] other than 'sliding_attention'"},
                   },
                   out);
}

// DeepSeek-V4 as llama.cpp's deepseek4, as DeepseekV4Model writes its release: every tensor in the
// type the checkpoint stores it in (block FP8 as Q8_0, BF16, F32, the I64 hash-routing table as
// I32, the MXFP4 experts as stored; file type MXFP4_MOE), its keys (sqrtsoftplus gating, the swiglu
// clamps as float arrays, the compression ratios as an int array, ...). A quantized preset is
// llama-quantize --allow-requantize of that file: the Q8_0 tensors requantized from their Q8_0
// values, the F32 ones from their F32 values.
BOOST_AUTO_TEST_CASE(deepseek_v4_becomes_deepseek4) {
    TempDir dir;
    const fs::path src = dir / "src", bf = dir / "bf16", q4 = dir / "q4";
    synth_and_convert(src, bf, {"deepseek_v4", "mxfp4"}, {"--quant-method", "BF16", "--single-file"});
    auto r = run_moequant(gguf_args(src, q4, {"--quant-method", "Q4_K_M", "--single-file"}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto config = boost::json::parse(read_text(src / "config.json")).as_object();
    auto number = [&](const char* key) { return config.at(key).to_number<std::int64_t>(); };
    const std::int64_t layers = number("num_hidden_layers"), hash_layers = number("num_hash_layers");
    const fs::path file = bf / "model.gguf";
    const GgufFile floats = read_gguf_file_header(file.string());
    auto u = [&](const std::string& key) { return unsigned_key(floats, "deepseek4." + key); };
    BOOST_TEST(floats.find("general.architecture")->as_string().value() == "deepseek4");
    BOOST_TEST(unsigned_key(floats, "general.file_type") == 38u);  // MOSTLY_MXFP4_MOE, whatever the outtype
    BOOST_TEST(u("block_count") == static_cast<std::uint64_t>(layers));
    BOOST_TEST(u("expert_gating_func") == 4u);  // sqrtsoftplus
    BOOST_TEST(u("hash_layer_count") == static_cast<std::uint64_t>(hash_layers));
    BOOST_TEST(u("embedding_length_out") == static_cast<std::uint64_t>(number("hidden_size") * number("hc_mult")));
    BOOST_TEST(u("rope.dimension_count") == static_cast<std::uint64_t>(number("qk_rope_head_dim")));
    const GgufValue* clamp = floats.find("deepseek4.swiglu_clamp_exp");
    BOOST_REQUIRE(clamp);
    BOOST_TEST((clamp->element == GgufType::f32 && clamp->count == static_cast<std::uint64_t>(layers)));
    float first_clamp = 0;
    std::memcpy(&first_clamp, clamp->bytes.data(), 4);
    BOOST_TEST(first_clamp == config.at("swiglu_limit").to_number<float>());
    const GgufValue* ratios = floats.find("deepseek4.attention.compress_ratios");
    BOOST_REQUIRE(ratios);
    const auto& config_ratios = config.at("compress_ratios").as_array();
    BOOST_TEST((ratios->element == GgufType::i32 && ratios->count == config_ratios.size()));
    for (std::size_t i = 0; i < config_ratios.size(); ++i) {
        std::int32_t v = 0;
        std::memcpy(&v, ratios->bytes.data() + 4 * i, 4);
        BOOST_TEST(v == config_ratios[i].to_number<std::int32_t>());
    }

    // Types as the checkpoint stores them.
    std::map<std::string, std::uint32_t> types;
    for (const auto& t : floats.tensors) types[t.name] = t.type;
    using namespace ggml_type_id;
    const std::int64_t compressed = [&] {  // the first layer with compress ratio 4: compressor and indexer
        for (std::size_t i = 0; i < config_ratios.size(); ++i)
            if (config_ratios[i].to_number<int>() == 4) return static_cast<std::int64_t>(i);
        return std::int64_t{-1};
    }();
    BOOST_REQUIRE(compressed >= 0);
    const std::string C = "blk." + std::to_string(compressed) + ".", last = "blk." + std::to_string(layers - 1) + ".";
    for (const std::string& name : {std::string("blk.0.attn_q_a.weight"), std::string("blk.0.attn_kv.weight"),
                                    std::string("blk.0.attn_output_a.weight"), std::string("blk.0.ffn_down_shexp.weight"),
                                    C + "indexer.attn_q_b.weight"})
        BOOST_TEST((types.count(name) && types.at(name) == q8_0), name);
    for (const std::string& name : {std::string("token_embd.weight"), std::string("output.weight"), std::string("blk.0.ffn_gate_inp.weight"),
                                    C + "attn_compressor_kv.weight", C + "indexer.proj.weight"})
        BOOST_TEST((types.count(name) && types.at(name) == bf16), name);
    for (const std::string& name : {std::string("blk.0.hc_attn_fn.weight"), std::string("output_hc_fn.weight"),
                                    C + "attn_compressor_ape.weight", std::string("blk.0.attn_sinks.weight"), std::string("blk.0.attn_norm.weight"),
                                    last + "exp_probs_b.bias"})
        BOOST_TEST((types.count(name) && types.at(name) == f32), name);
    BOOST_TEST(types.at("blk.0.ffn_gate_tid2eid.weight") == i32);
    BOOST_TEST(!types.count(last + "ffn_gate_tid2eid.weight"));
    BOOST_TEST(types.at("blk.0.ffn_gate_exps.weight") == mxfp4);
    BOOST_TEST(!types.count("blk." + std::to_string(layers) + ".attn_norm.weight"));  // no MTP block

    // The hash table: the checkpoint's I64 expert ids as I32.
    const Checkpoint source = Checkpoint::open(src);
    const TensorView table = source.view("layers.0.ffn.gate.tid2eid");
    const auto tid2eid = tensor_data(file, "blk.0.ffn_gate_tid2eid.weight");
    BOOST_REQUIRE(tid2eid.bytes.size() == table.elements() * 4);
    bool same = true;
    for (std::size_t i = 0; i < table.elements(); ++i) {
        std::int64_t wide = 0;
        std::int32_t narrow = 0;
        std::memcpy(&wide, static_cast<const std::byte*>(table.data()) + 8 * i, 8);
        std::memcpy(&narrow, tid2eid.bytes.data() + 4 * i, 4);
        same = same && wide == narrow;
    }
    BOOST_TEST(same);
    // An FP8 weight: ggml's Q8_0 rows of its exact decode, E4M3 x 2^(e - 127) per 128 x 128 block.
    const TensorView codes = source.view("layers.0.attn.wq_a.weight"), scales = source.view("layers.0.attn.wq_a.scale");
    BOOST_REQUIRE((codes.dtype == DType::F8_E4M3 && scales.dtype == DType::F8_E8M0));
    const std::int64_t rows = codes.shape[0], cols = codes.shape[1], scale_cols = scales.shape[1];
    std::vector<float> decoded(static_cast<std::size_t>(rows * cols));
    const auto* code = reinterpret_cast<const std::uint8_t*>(codes.data());
    const auto* scale = reinterpret_cast<const std::uint8_t*>(scales.data());
    for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
            decoded[i * cols + j] = e4m3(code[i * cols + j]) * e8m0(scale[(i / 128) * scale_cols + j / 128]);
    const auto q8 = tensor_data(file, "blk.0.attn_q_a.weight");
    const auto* q8_rows = ggml_quants::ggml_type_named("q8_0");
    std::vector<std::uint8_t> expected(q8.bytes.size());
    for (std::int64_t row = 0; row < rows; ++row)
        q8_rows->quantize(decoded.data() + row * cols, expected.data() + row * q8_rows->row_bytes(cols), cols, nullptr);
    BOOST_TEST((q8.bytes == expected));

    // Q4_K_M: llama-quantize --allow-requantize of the BF16 preset's file, tensor by tensor.
    const fs::path quantized = q4 / "model.gguf";
    for (const std::string& name : {std::string("blk.0.attn_q_a.weight"), std::string("blk.0.ffn_down_shexp.weight"),
                                    std::string("blk.0.hc_attn_fn.weight"), std::string("output_hc_fn.weight"),
                                    C + "attn_compressor_kv.weight", C + "attn_compressor_ape.weight", std::string("token_embd.weight")}) {
        const auto target = tensor_data(quantized, name);
        BOOST_TEST(target.info.type != tensor_data(file, name).info.type, name);
        BOOST_TEST((target.bytes == requantized(tensor_data(file, name), target.info)), name);
    }
    BOOST_TEST((tensor_data(quantized, "blk.0.ffn_gate_tid2eid.weight").bytes == tid2eid.bytes));
    BOOST_TEST((tensor_data(quantized, "blk.0.ffn_gate_inp.weight").bytes == tensor_data(file, "blk.0.ffn_gate_inp.weight").bytes));

    ConfigEdits edited{src, dir.path()};
    // A hash table routing a token to an expert the layer does not have: refused, naming it.
    const fs::path bad = dir / "bad-table";
    fs::copy(src, bad);
    const std::string table_name = "layers.0.ffn.gate.tid2eid";
    const auto index = boost::json::parse(read_text(bad / "model.safetensors.index.json")).as_object();
    const fs::path shard = bad / std::string(index.at("weight_map").at(table_name).as_string());
    std::vector<std::uint8_t> shard_bytes = read_bytes(shard);
    std::uint64_t header_size = 0;
    std::memcpy(&header_size, shard_bytes.data(), 8);
    const auto header = boost::json::parse(std::string(reinterpret_cast<const char*>(shard_bytes.data()) + 8, header_size)).as_object();
    const std::uint64_t at = 8 + header_size + header.at(table_name).at("data_offsets").as_array()[0].to_number<std::uint64_t>() + 5 * 8;
    const std::int64_t out_of_range = number("n_routed_experts");
    std::memcpy(shard_bytes.data() + at, &out_of_range, 8);
    write_bytes(shard, shard_bytes);
    check_refusals({{gguf_args(bad, dir / "refused", {"--quant-method", "BF16"}), 3,
                     "tensor '" + table_name + "': holds " + std::to_string(out_of_range) + " at element 5; expert indices run 0.."}},
                   dir / "refused");

    check_refusals({{edited("\"scoring_func\": \"sqrtsoftplus\"", "\"scoring_func\": \"softmax\""), 3,
                     "llama.cpp's deepseek4 routes by sqrtsoftplus only"},
                    {edited("\"hc_mult\": 4", "\"hc_mult\": 2"), 3, "mixes 4 hyper-connection streams"},
                    {edited("\"index_head_dim\": 64", "\"index_head_dim\": 48"), 3, "rotates indexer heads of a power of two"},
                    {edited("\"num_hash_layers\": 3", "\"num_hash_layers\": 5"), 3, "has num_hash_layers 5 for 4 layers"},
                    {edited("\"qk_rope_head_dim\": 32", "\"qk_rope_head_dim\": 256"), 3, "rotates part of each head"},
                    // a count that would wrap around in the file's u32
                    {edited("\"hc_sinkhorn_iters\": 20", "\"hc_sinkhorn_iters\": -5"), 3,
                     "has hc_sinkhorn_iters -5, not a count a GGUF u32 holds"}},
                   dir / "refused");
}

BOOST_AUTO_TEST_CASE(what_gguf_cannot_write_is_refused_before_any_file) {
    TempDir dir;
    const fs::path qwen = dir / "qwen", qwen2 = dir / "qwen2";
    synth_checkpoint(qwen, {"qwen3_moe", "bf16"});
    // A model type no GGUF architecture is written for, read by an adapter the user names.
    fs::copy(qwen, qwen2);
    std::string config = read_text(qwen2 / "config.json");
    BOOST_REQUIRE(config.find("\"qwen3_moe\"") != std::string::npos);
    config.replace(config.find("\"qwen3_moe\""), 11, "\"qwen2_moe\"");
    write_text(qwen2 / "config.json", config);
    const fs::path out = dir / "refused";
    check_refusals({
                       {gguf_args(qwen, out, {}), 2, "--format gguf needs --quant-method PRESET"},
                       {gguf_args(qwen, out, {"--quant-method", "Q9_K"}), 2, "needs a llama-quantize preset, got 'Q9_K'"},
                       {gguf_args(qwen, out, {"--quant-method", "Q4_K_M", "--tensor-type", "attn_q"}), 2, "expected PATTERN=TYPE"},
                       {gguf_args(qwen, out, {"--quant-method", "Q4_K_M", "--tensor-type", "attn_q=q9_0"}), 2,
                        "is no GGUF type moequant writes"},
                       {gguf_args(qwen2, out, {"--quant-method", "Q4_K_M", "--family", "qwen3_moe"}), 3,
                        "GGUF output is not written for model type 'qwen2_moe' yet"},
                   },
                   out);
}

// A GGUF model of any writer's naming is read where its file is given: one file, or the first of
// llama-gguf-split's parts PREFIX-0000K-of-0000N.gguf with its siblings; a folder holding one
// model of another name too. eval, verify and inspect then see moequant's own output's experts.
BOOST_AUTO_TEST_CASE(a_gguf_model_is_read_by_its_file_name) {
    TempDir dir;
    const fs::path src = dir / "src";
    synth_checkpoint(src, {"qwen3_moe", "bf16"});
    for (const char* layout : {"--single-file", "--split-max-tensors"}) {
        std::vector<std::string> extra = {"--quant-method", "Q4_K_M", layout};
        if (std::string(layout) == "--split-max-tensors") extra.push_back("12");
        BOOST_REQUIRE(run_moequant(gguf_args(src, dir / layout, extra)).exit_code == 0);
    }
    auto kl = [&](const fs::path& weights) {
        auto r = run_moequant({"eval", "--model_id", src.string(), "--cpu-weights", weights.string(), "--dataset", "embedded",
                               "--num_calibration_samples", "2", "--max_sequence_length", "32", "--json", "-q"});
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return boost::json::parse(r.out).at("kl_mean").as_double();
    };
    const double expected = kl(dir / "--single-file");
    // One file of another name, given by name and as the only model of its folder.
    fs::create_directories(dir / "models");
    const fs::path single = dir / "models" / "Tiny-Q4_K_M.gguf";
    fs::copy_file(dir / "--single-file" / "model.gguf", single);
    BOOST_TEST(kl(single) == expected);
    BOOST_TEST(kl(dir / "models") == expected);
    auto verified = run_moequant({"verify", "--source", src.string(), "--converted", single.string(), "-q"});
    BOOST_TEST(verified.exit_code == 0, verified.out << verified.err);
    auto inspected = run_moequant({"inspect", single.string()});
    BOOST_TEST(contains(inspected.out, "Tiny-Q4_K_M.gguf"), inspected.out << inspected.err);
    // Split parts renamed as llama-gguf-split names them.
    std::size_t count = 0;
    for (const auto& entry : fs::directory_iterator(dir / "--split-max-tensors")) count += entry.path().extension() == ".gguf";
    BOOST_REQUIRE(count > 1u);
    fs::create_directories(dir / "split");
    for (std::size_t k = 0; k < count; ++k) {
        char from[40], to[40];
        std::snprintf(from, sizeof from, "model-%05zu-of-%05zu.gguf", k + 1, count);
        std::snprintf(to, sizeof to, "Tiny-%05zu-of-%05zu.gguf", k + 1, count);
        fs::copy_file(dir / "--split-max-tensors" / from, dir / "split" / to);
    }
    char first[40], second[40];
    std::snprintf(first, sizeof first, "Tiny-00001-of-%05zu.gguf", count);
    std::snprintf(second, sizeof second, "Tiny-00002-of-%05zu.gguf", count);
    BOOST_TEST(kl(dir / "split" / first) == expected);
    auto later = run_moequant({"inspect", (dir / "split" / second).string()});
    BOOST_TEST(later.exit_code == 3, later.err);
    BOOST_TEST(contains(later.err, "give the first part, " + std::string(first)), later.err);
    fs::rename(dir / "split" / second, dir / "second.gguf");
    auto missing = run_moequant({"inspect", (dir / "split" / first).string()});
    BOOST_TEST(missing.exit_code == 3, missing.err);
    BOOST_TEST(contains(missing.err, "is missing"), missing.err);
    // Two models in one folder: which one is the user's to say.
    fs::copy_file(single, dir / "models" / "Other.gguf");
    auto two = run_moequant({"verify", "--source", src.string(), "--converted", (dir / "models").string()});
    BOOST_TEST(two.exit_code == 3, two.err);
    BOOST_TEST(contains(two.err, "holds 2 GGUF models (Other.gguf, Tiny-Q4_K_M.gguf)"), two.err);
}

BOOST_AUTO_TEST_SUITE_END()
