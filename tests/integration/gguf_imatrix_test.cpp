// convert --format gguf --imatrix FILE as llama-quantize --imatrix: each expert's rows are
// ggml's quantization weighed by its own slice of the stacked tensor's entry (an expert that saw
// no token by llama.cpp's stand-in 1s, named in a note), dense tensors by theirs, with the
// GGUF and the legacy .dat form alike; the output records llama-quantize's quantize.imatrix.*
// keys and the manifest the file's identity; a wrong file is refused before any output exists.
// llama.cpp's llama-imatrix and llama-quantize on the same files: docs/gguf-imatrix.md.
#include "checkpoint_rewrite.hpp"
#include "ggml_types.hpp"
#include "gguf_container.hpp"
#include "gguf_imatrix.hpp"
#include "gguf_type_policy.hpp"
#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/layer_ops.hpp>
#include <moequant/router.hpp>
#include <moequant/safetensors_reader.hpp>

#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>

using namespace moequant;
using namespace moequant::formats;
using namespace moequant::test;

namespace {

const char* first_part = "model-00001-of-00003.gguf";
const char* layer0_part = "model-00002-of-00003.gguf";

std::vector<std::string> gguf_args(const fs::path& src, const fs::path& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"convert", "-i", src.string(), "-o", out.string(), "--format", "gguf", "--quant-method", "Q4_K_M"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

// Statistics for every stacked expert tensor of the plain output, and for blk.0.attn_q; expert 5
// of every tensor saw no token.
ImatrixRecord statistics_for(const fs::path& plain) {
    ImatrixRecord record{.datasets = {"calibration.txt"}, .chunk_count = 3, .chunk_size = 256};
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> sum(0.01f, 40.0f);
    for (const char* part : {first_part, layer0_part, "model-00003-of-00003.gguf"})
        for (const auto& t : read_gguf_file_header((plain / part).string()).tensors) {
            if (!contains(t.name, "_exps.weight") && t.name != "blk.0.attn_q.weight") continue;
            const std::int64_t matrices = t.ne.size() > 2 ? t.ne[2] : 1;
            ImatrixStatistics s{.name = t.name, .cols = t.ne[0]};
            for (std::int64_t m = 0; m < matrices; ++m) s.counts.push_back(m == 5 && matrices > 1 ? 0.0f : static_cast<float>(3 + 17 * m));
            for (std::int64_t i = 0; i < t.ne[0] * matrices; ++i) s.sums.push_back(sum(rng));
            record.weights.push_back(std::move(s));
        }
    return record;
}

// The bytes ggml writes for the BF16 matrix `weight` [rows, cols] in type `type`, each row
// weighed by `importance`.
std::vector<std::uint8_t> ggml_rows_of(const Checkpoint& source, const std::string& weight, const char* type,
                                       const std::vector<float>& importance) {
    const TensorView v = source.view(weight);
    const std::int64_t rows = v.shape[0], cols = v.shape[1];
    std::vector<float> values(static_cast<std::size_t>(rows * cols));
    convert_bf16_to_f32(v.data(), values.data(), values.size());
    const auto* codec = ggml_quants::ggml_type_named(type);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * codec->row_bytes(cols)));
    for (std::int64_t r = 0; r < rows; ++r)
        codec->quantize(values.data() + r * cols, out.data() + r * codec->row_bytes(cols), cols, importance.data());
    return out;
}

// Tensor `name` of a GGUF file: its bytes, `first` .. `first + size`.
std::vector<std::uint8_t> gguf_bytes(const fs::path& file, const std::string& name, std::uint64_t skip, std::size_t size) {
    const GgufFile header = read_gguf_file_header(file.string());
    const GgufTensorInfo& t = *header.tensor(name);
    const std::vector<std::uint8_t> all = read_bytes(file);
    const auto at = static_cast<std::ptrdiff_t>(t.offset + skip);
    return {all.begin() + at, all.begin() + at + static_cast<std::ptrdiff_t>(size)};
}

// The output's experts and attn_q are ggml's rows weighed as `imatrix` weighs them.
void expect_weighed_as(const fs::path& src, const fs::path& out, const fs::path& imatrix_path) {
    const Checkpoint source = Checkpoint::open(src);
    const ImatrixFile imatrix = ImatrixFile::open(imatrix_path);
    const GgufFile layer0 = read_gguf_file_header((out / layer0_part).string());
    const GgufTensorInfo& gate = *layer0.tensor("blk.0.ffn_gate_exps.weight");
    BOOST_REQUIRE(gate.type == ggml_type_id::q4_k);
    const auto entry = imatrix.entry_for(gate.name, gate.ne[0], gate.ne[2]);
    BOOST_REQUIRE(entry.has_value());
    const std::uint64_t expert_bytes = gate.bytes / static_cast<std::uint64_t>(gate.ne[2]);
    for (std::int64_t e : {0, 5, 7}) {
        const std::vector<float> weights = imatrix.matrix(*entry, e).weights;
        const auto expected = ggml_rows_of(source, "model.layers.0.mlp.experts." + std::to_string(e) + ".gate_proj.weight", "q4_K", weights);
        BOOST_TEST((gguf_bytes(out / layer0_part, gate.name, static_cast<std::uint64_t>(e) * expert_bytes, expected.size()) == expected),
                   "expert " << e);
    }
    const GgufFile first = read_gguf_file_header((out / first_part).string());
    const GgufTensorInfo& q = *first.tensor("blk.0.attn_q.weight");
    const auto q_entry = imatrix.entry_for(q.name, q.ne[0], 1);
    const std::string q_type(ggml_type_name_of(q.type));
    BOOST_TEST(q.type != ggml_type_id::f32);
    const auto expected_q = ggml_rows_of(source, "model.layers.0.self_attn.q_proj.weight", q_type.c_str(), imatrix.weights(*q_entry));
    BOOST_TEST((gguf_bytes(out / first_part, q.name, 0, expected_q.size()) == expected_q));
}

// Every tensor of two GGUF files: the same names, types, dims and bytes.
void expect_same_tensors(const fs::path& a, const fs::path& b) {
    const GgufFile ha = read_gguf_file_header(a.string()), hb = read_gguf_file_header(b.string());
    BOOST_REQUIRE(ha.tensors.size() == hb.tensors.size());
    for (const GgufTensorInfo& t : ha.tensors) {
        const GgufTensorInfo* u = hb.tensor(t.name);
        BOOST_REQUIRE_MESSAGE(u, t.name << " only in " << a);
        BOOST_TEST((u->type == t.type && u->ne == t.ne), t.name);
        BOOST_TEST((gguf_bytes(a, t.name, 0, t.bytes) == gguf_bytes(b, t.name, 0, u->bytes)), t.name << " in " << a.filename());
    }
}

std::vector<std::string> plus(std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

// `record --imatrix` on `samples` samples of at most `tokens` tokens of the embedded text.
std::vector<std::string> record_args(const fs::path& src, const fs::path& imatrix, const std::string& samples, const std::string& tokens) {
    return {"record", "--model_id", src.string(), "--dataset", "embedded", "--imatrix", imatrix.string(),
            "--num_calibration_samples", samples, "--max_sequence_length", tokens};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_imatrix)

BOOST_AUTO_TEST_CASE(experts_and_dense_tensors_are_weighed_as_llama_quantize_weighs_them) {
    TempDir dir;
    const fs::path src = dir / "src";
    synth_checkpoint(src, {"qwen3_moe", "bf16"});
    auto plain = run_moequant(gguf_args(src, dir / "plain", {"--quiet"}));
    BOOST_REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
    const ImatrixRecord record = statistics_for(dir / "plain");
    write_imatrix_gguf(dir / "imatrix.gguf", record);
    write_imatrix_legacy(dir / "imatrix.dat", record);

    auto r = run_moequant(gguf_args(src, dir / "out", {"--imatrix", (dir / "imatrix.gguf").string()}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST(contains(r.err, "layer 0: the importance matrix saw no token of expert(s) 5"), r.err);
    expect_weighed_as(src, dir / "out", dir / "imatrix.gguf");
    BOOST_TEST((read_bytes(dir / "out" / layer0_part) != read_bytes(dir / "plain" / layer0_part)));

    // What llama-quantize records of it.
    const GgufFile first = read_gguf_file_header((dir / "out" / first_part).string());
    BOOST_TEST(first.find("quantize.imatrix.file")->as_string().value() == (dir / "imatrix.gguf").string());
    BOOST_TEST(first.find("quantize.imatrix.dataset")->as_string().value() == "calibration.txt");
    BOOST_TEST(first.find("quantize.imatrix.entries_count")->as_signed().value() == static_cast<std::int64_t>(record.weights.size()));
    BOOST_TEST(first.find("quantize.imatrix.chunks_count")->as_signed().value() == 3);
    BOOST_TEST(contains(read_text(dir / "out" / "moequant-run.json"), "GGUF imatrix"));

    // The legacy form, with its own arithmetic (value / ncall).
    auto legacy = run_moequant(gguf_args(src, dir / "legacy", {"--quiet", "--imatrix", (dir / "imatrix.dat").string()}));
    BOOST_REQUIRE_MESSAGE(legacy.exit_code == 0, legacy.err);
    expect_weighed_as(src, dir / "legacy", dir / "imatrix.dat");

    // --dry-run sizes the first part, the imatrix keys included.
    auto dry = run_moequant(gguf_args(src, dir / "dry", {"--dry-run", "--imatrix", (dir / "imatrix.gguf").string()}));
    BOOST_TEST(dry.exit_code == 0, dry.err);
    std::string size = std::to_string(fs::file_size(dir / "out" / first_part));
    for (int at = static_cast<int>(size.size()) - 3; at > 0; at -= 3) size.insert(static_cast<std::size_t>(at), ",");
    BOOST_TEST(contains(dry.out, size + " bytes"), dry.out);

    // Another importance matrix in the same file is another job: refused without --overwrite,
    // then every layer converted again with it.
    ImatrixRecord other = record;
    for (float& v : other.weights[0].sums) v = 1.0f / v;
    write_imatrix_gguf(dir / "imatrix.gguf", other);
    auto refused = run_moequant(gguf_args(src, dir / "out", {"--quiet", "--imatrix", (dir / "imatrix.gguf").string()}));
    BOOST_TEST(refused.exit_code != 0);
    BOOST_TEST(contains(refused.err, "another conversion"), refused.err);
    auto again = run_moequant(gguf_args(src, dir / "out", {"--quiet", "--overwrite", "--imatrix", (dir / "imatrix.gguf").string()}));
    BOOST_TEST(again.exit_code == 0, again.err);
    expect_weighed_as(src, dir / "out", dir / "imatrix.gguf");
}

BOOST_AUTO_TEST_CASE(a_wrong_importance_matrix_is_refused_before_any_file) {
    TempDir dir;
    const fs::path src = dir / "src";
    synth_checkpoint(src, {"qwen3_moe", "bf16"});
    ImatrixRecord record{.datasets = {"x"}, .chunk_count = 1, .chunk_size = 16};
    record.weights.push_back({.name = "blk.1.ffn_down_exps.weight", .cols = 3, .sums = std::vector<float>(24, 1.0f), .counts = std::vector<float>(8, 2.0f)});
    write_imatrix_gguf(dir / "wrong.gguf", record);
    auto r = run_moequant(gguf_args(src, dir / "out", {"--imatrix", (dir / "wrong.gguf").string()}));
    BOOST_TEST(r.exit_code == 3, r.err);
    BOOST_TEST(contains(r.err, "wrong.gguf: entry blk.1.ffn_down_exps.weight holds 24 values"), r.err);
    BOOST_TEST(!fs::exists(dir / "out" / first_part));

    auto missing = run_moequant(gguf_args(src, dir / "out", {"--imatrix", (dir / "none.dat").string()}));
    BOOST_TEST(missing.exit_code == 3, missing.err);
    BOOST_TEST(contains(missing.err, "none.dat"), missing.err);

    auto other_format = run_moequant({"convert", "-i", src.string(), "-o", (dir / "kt").string(), "--imatrix", (dir / "wrong.gguf").string()});
    BOOST_TEST(other_format.exit_code == 2, other_format.err);
    BOOST_TEST(contains(other_format.err, "are options of --format gguf"), other_format.err);
}

// convert --calibrate --format gguf measures the experts' importance as llama-imatrix does: for
// gate and up, the mean square of each input column over the tokens the router sends the
// expert (checked here on recorded inputs, routed by the plan's router independently).
BOOST_AUTO_TEST_CASE(calibration_measures_the_experts_importance_as_llama_imatrix_does) {
    TempDir dir;
    const fs::path src = dir / "src", acts = dir / "acts.safetensors", out = dir / "out";
    synth_checkpoint(src, {"qwen3_moe", "bf16"});
    auto rec = run_moequant({"record", "--model_id", src.string(), "--dataset", "embedded", "--output", acts.string(),
                             "--num_calibration_samples", "6", "--max_sequence_length", "256"});
    BOOST_REQUIRE_MESSAGE(rec.exit_code == 0, rec.err);
    auto r = run_moequant(gguf_args(src, out, {"--quiet", "--calibrate", "--calibration-activations", acts.string()}));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const GgufFile first = read_gguf_file_header((out / first_part).string());
    BOOST_TEST(first.find("quantize.imatrix.entries_count")->as_signed().value() == 6);  // 2 layers x 3 stacked tensors
    BOOST_TEST(contains(first.find("quantize.imatrix.dataset")->as_string().value(), "experts see their routed tokens"));

    // The plan's router over the recorded inputs of layer 0.
    Registry registry;
    registry.load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / "moequant-adapter-qwen3_moe.so", PluginOrigin::explicit_file);
    registry.load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / "moequant-encoding-float.so", PluginOrigin::explicit_file);
    Checkpoint source = Checkpoint::open(src);
    attach_encodings(source, registry);
    const ModelConfig config = source.config();
    const ModelPlan plan = registry.adapter("qwen3_moe")->plan(config, source);
    const SafetensorsFile recorded = SafetensorsFile::open(acts);
    const TensorView x = recorded.view("layers.0.moe_input");
    const std::int64_t tokens = x.shape[0], hidden = x.shape[1], experts = plan.num_experts;
    std::vector<float> inputs(static_cast<std::size_t>(tokens * hidden));
    if (x.dtype == DType::F32) std::memcpy(inputs.data(), x.data(), inputs.size() * 4);
    else convert_bf16_to_f32(x.data(), inputs.data(), inputs.size());
    const std::vector<float> router = load_f32(source, plan.moe_layers.front().router_weight);
    const std::vector<float> logits = linear(inputs, tokens, router, experts, hidden);
    const Routing routing = route_tokens(plan.router, logits.data(), tokens, experts, nullptr);
    std::vector<std::vector<std::int64_t>> routed(static_cast<std::size_t>(experts));
    for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t k = 0; k < routing.top_k; ++k) routed[static_cast<std::size_t>(routing.experts[t * routing.top_k + k])].push_back(t);
    // The same routing as the conversion's (its coverage record) ...
    const auto manifest = RunManifest::load(out);
    BOOST_REQUIRE(manifest && manifest->completed_layers.front().coverage);
    const LayerCoverage& coverage = *manifest->completed_layers.front().coverage;
    for (std::int64_t e = 0; e < experts; ++e)
        BOOST_TEST(coverage.tokens_per_expert[static_cast<std::size_t>(e)] == static_cast<std::int64_t>(routed[static_cast<std::size_t>(e)].size()));
    // ... and each expert's gate rows weighed by the mean squares of its tokens' inputs.
    const GgufFile layer0 = read_gguf_file_header((out / layer0_part).string());
    const GgufTensorInfo& gate = *layer0.tensor("blk.0.ffn_gate_exps.weight");
    const std::uint64_t expert_bytes = gate.bytes / static_cast<std::uint64_t>(gate.ne[2]);
    for (std::int64_t e : {0, 3, 7}) {
        const auto& rows = routed[static_cast<std::size_t>(e)];
        BOOST_REQUIRE(!rows.empty());
        std::vector<double> sums(static_cast<std::size_t>(hidden), 0.0);
        for (std::int64_t t : rows)
            for (std::int64_t c = 0; c < hidden; ++c) {
                const double v = inputs[static_cast<std::size_t>(t * hidden + c)];
                sums[static_cast<std::size_t>(c)] += v * v;
            }
        // The mean squares as llama-quantize computes them from an imatrix file: F32 sum / F32 count.
        std::vector<float> weights;
        for (double s : sums) weights.push_back(static_cast<float>(s) / static_cast<float>(rows.size()));
        const auto expected = ggml_rows_of(source, "model.layers.0.mlp.experts." + std::to_string(e) + ".gate_proj.weight",
                                           std::string(ggml_type_name_of(gate.type)).c_str(), weights);
        BOOST_TEST((gguf_bytes(out / layer0_part, gate.name, static_cast<std::uint64_t>(e) * expert_bytes, expected.size()) == expected),
                   "expert " << e);
    }
    // Calibration measures one importance matrix; a file gives another: not both.
    write_imatrix_gguf(dir / "i.gguf", statistics_for(out));
    auto both = run_moequant(gguf_args(src, dir / "both", {"--calibrate", "--dataset", "embedded", "--imatrix", (dir / "i.gguf").string()}));
    BOOST_TEST(both.exit_code == 2, both.err);
    BOOST_TEST(contains(both.err, "give one of them"), both.err);
}

// record --imatrix writes what llama-imatrix writes for the stacked expert tensors, measured as
// convert --calibrate measures them (one measurement, expert_importance_statistics.hpp): per
// expert, F32 sums of the squared (in_sum2) and plain (in_sum) inputs over its routed tokens and
// the token count. Quantizing with that file is then convert --calibrate, tensor for tensor —
// also where experts saw no token (count 0, weighed 1 both ways) — and only the provenance keys
// of part 1 differ. The legacy form's weights go through x ncall / ncall (its layout), so it
// is checked against the GGUF form's to F32 rounding; llama-quantize itself on it: the developer
// check in docs/gguf-imatrix.md.
BOOST_AUTO_TEST_CASE(record_writes_the_importance_matrix_convert_calibrate_measures) {
    TempDir dir;
    const fs::path src = dir / "src";
    synth_checkpoint(src, {"qwen3_moe", "bf16"});
    struct Case {
        std::string samples, tokens;
        bool unseen;  // some expert of every layer sees no token
    };
    for (const Case& c : {Case{"6", "256", false}, Case{"1", "2", true}}) {
        BOOST_TEST_CONTEXT(c.samples << " sample(s) of at most " << c.tokens << " tokens") {
            const fs::path run = dir / ("run" + c.samples), imatrix = run / "i.gguf";
            fs::create_directories(run);
            auto rec = run_moequant(record_args(src, imatrix, c.samples, c.tokens));
            BOOST_REQUIRE_MESSAGE(rec.exit_code == 0, rec.err);
            BOOST_TEST(contains(rec.out, "GGUF imatrix, 6 expert entries"), rec.out);
            auto legacy = run_moequant(plus(record_args(src, run / "i.dat", c.samples, c.tokens), {"--quiet"}));
            BOOST_REQUIRE_MESSAGE(legacy.exit_code == 0, legacy.err);
            BOOST_TEST(contains(legacy.out, "legacy imatrix"), legacy.out);

            auto with_file = run_moequant(gguf_args(src, run / "file", {"--quiet", "--imatrix", imatrix.string()}));
            BOOST_REQUIRE_MESSAGE(with_file.exit_code == 0, with_file.err);
            auto measured = run_moequant(gguf_args(src, run / "calibrate", {"--quiet", "--calibrate", "--dataset", "embedded",
                                                                             "--num_calibration_samples", c.samples, "--max_sequence_length", c.tokens}));
            BOOST_REQUIRE_MESSAGE(measured.exit_code == 0, measured.err);
            for (const char* part : {first_part, layer0_part, "model-00003-of-00003.gguf"})
                expect_same_tensors(run / "file" / part, run / "calibrate" / part);
            const GgufFile first = read_gguf_file_header((run / "file" / first_part).string());
            BOOST_TEST(first.find("quantize.imatrix.file")->as_string().value() == imatrix.string());
            BOOST_TEST(first.find("quantize.imatrix.dataset")->as_string().value() == "embedded");
            BOOST_TEST(first.find("quantize.imatrix.chunks_count")->as_signed().value() == std::stoll(c.samples));
            BOOST_TEST(first.find("quantize.imatrix.entries_count")->as_signed().value() == 6);

            // The file: llama-imatrix's keys, its entries' shapes, the calibration's token counts.
            const GgufFile header = read_gguf_file_header(imatrix.string());
            BOOST_TEST(header.find("general.type")->as_string().value() == "imatrix");
            BOOST_TEST((header.find("imatrix.datasets")->as_strings().value() == std::vector<std::string>{"embedded"}));
            BOOST_TEST(header.find("imatrix.chunk_count")->as_unsigned().value() == std::stoull(c.samples));
            BOOST_TEST((header.find("imatrix.chunk_size")->type == GgufType::u32));
            BOOST_TEST(header.tensors.size() == 18u);  // 2 layers x 3 tensors x (in_sum2, counts, in_sum)
            ImatrixFile file = ImatrixFile::open(imatrix);
            file.check_contents();
            ImatrixFile dat = ImatrixFile::open(run / "i.dat");
            dat.check_contents();
            const auto manifest = RunManifest::load(run / "calibrate");
            BOOST_REQUIRE(manifest);
            for (const auto& layer : manifest->completed_layers) {
                const LayerCoverage& coverage = *layer.coverage;
                const std::string blk = "blk." + std::to_string(layer.layer) + ".ffn_";
                const GgufTensorInfo& sums = *header.tensor(blk + "down_exps.weight.in_sum2");
                BOOST_TEST((sums.ne == std::vector<std::int64_t>{256, 8}));  // [intermediate, experts]
                BOOST_TEST((header.tensor(blk + "gate_exps.weight.counts")->ne == std::vector<std::int64_t>{1, 8}));
                const ImatrixEntry& gate = *file.find(blk + "gate_exps.weight");
                const ImatrixEntry& up = *file.find(blk + "up_exps.weight");
                BOOST_TEST((file.weights(gate) == file.weights(up)));  // the same inputs
                bool unseen = false;
                for (std::size_t e = 0; e < coverage.experts.size(); ++e) {
                    const ColumnImportance g = file.matrix(gate, coverage.experts[e]);
                    BOOST_TEST(g.tokens == coverage.tokens_per_expert[e], "expert " << coverage.experts[e]);
                    unseen = unseen || g.tokens == 0;
                    // The legacy form: the same weights, through its x ncall / ncall.
                    const auto dat_down = dat.entry_for(blk + "down_exps.weight", 256, 8);
                    BOOST_REQUIRE(dat_down.has_value());
                    const std::vector<float> a = file.matrix(*file.find(blk + "down_exps.weight"), coverage.experts[e]).weights;
                    const std::vector<float> b = dat.matrix(*dat_down, coverage.experts[e]).weights;
                    for (std::size_t i = 0; i < a.size(); ++i)
                        BOOST_TEST(std::abs(a[i] - b[i]) <= 1e-6f * std::abs(a[i]), "expert " << coverage.experts[e] << " column " << i);
                }
                BOOST_TEST(unseen == c.unseen, "layer " << layer.layer);
                if (c.unseen)  // named in the note, with --quiet or not
                    BOOST_TEST(contains(rec.err, "layer " + std::to_string(layer.layer) + ": no calibration token was routed to expert(s)"),
                               rec.err);
            }
        }
    }
}

// record's outputs are checked as --output is, before the model runs; non-finite statistics are
// refused before the file is written; --output and --imatrix together write both.
BOOST_AUTO_TEST_CASE(record_imatrix_is_refused_where_an_output_would_be) {
    TempDir dir;
    const fs::path src = dir / "src", mine = dir / "mine.gguf";
    synth_checkpoint(src, {"qwen3_moe", "bf16"});
    write_text(mine, "not mine to replace");
    const std::vector<std::string> record = {"record", "--model_id", src.string(), "--dataset", "embedded", "--num_calibration_samples", "2", "--quiet"};
    auto neither = run_moequant(record);
    BOOST_TEST(neither.exit_code == 2, neither.err);
    BOOST_TEST(contains(neither.err, "--output FILE or --imatrix FILE"), neither.err);
    auto same = run_moequant(plus(record, {"--output", (dir / "a").string(), "--imatrix", (dir / "a").string()}));
    BOOST_TEST(same.exit_code == 2, same.err);
    auto exists = run_moequant(plus(record, {"--imatrix", mine.string()}));
    BOOST_TEST(exists.exit_code == 5, exists.err);
    BOOST_TEST(contains(exists.err, "OutputExists"), exists.err);
    BOOST_TEST(read_text(mine) == "not mine to replace");
    auto inside = run_moequant(plus(record, {"--imatrix", (src / "i.gguf").string()}));
    BOOST_TEST(inside.exit_code == 5, inside.err);
    BOOST_TEST(!fs::exists(src / "i.gguf"));
    // A NaN expert weight makes its down inputs NaN: refused as llama-imatrix stops, no file.
    const fs::path nan = dir / "nan";
    fs::copy(src, nan, fs::copy_options::recursive);
    edit_tensor_bytes(nan, "model.layers.1.mlp.experts.0.gate_proj.weight", [](std::uint8_t* data, std::size_t size) {
        for (std::size_t i = 0; i + 1 < size; i += 2) data[i] = 0xC0, data[i + 1] = 0x7F;  // BF16 NaN
    });
    auto non_finite = run_moequant({"record", "--model_id", nan.string(), "--dataset", "embedded", "--num_calibration_samples", "2",
                                    "--quiet", "--imatrix", (dir / "nan.gguf").string()});
    BOOST_TEST(non_finite.exit_code == 3, non_finite.err);
    BOOST_TEST(contains(non_finite.err, "blk.1.ffn_down_exps.weight are not finite (expert 0"), non_finite.err);
    BOOST_TEST(!fs::exists(dir / "nan.gguf"));
    // Both: the activations and the matrix, in one run.
    auto both = run_moequant(plus(record, {"--output", (dir / "a.safetensors").string(), "--imatrix", (dir / "i.dat").string()}));
    BOOST_REQUIRE_MESSAGE(both.exit_code == 0, both.err);
    BOOST_TEST(fs::exists(dir / "a.safetensors"));
    BOOST_TEST((ImatrixFile::open(dir / "i.dat").form() == ImatrixFile::Form::legacy));
}

BOOST_AUTO_TEST_SUITE_END()
