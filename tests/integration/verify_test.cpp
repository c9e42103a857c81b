// `moequant verify` end to end: it passes on every family x method x format that synth +
// convert produce, and fails with the right message when one byte of a weight is flipped, a
// tensor is dropped, a shard or file is truncated, or the output is unfinished; two outputs
// compare byte for byte whatever their formats, and outputs that cannot match are refused.

#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <moequant/safetensors_reader.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <tuple>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

void convert(const fs::path& in, const fs::path& out, const std::string& method, bool tree, int parts = 2) {
    std::vector<std::string> args = {"convert", "-i", in.string(), "-o", out.string(), "--quant-method", method,
                                      "--threadpool-count", std::to_string(parts), "--quiet"};
    if (tree) args.push_back("--no-merge-safetensor");
    auto r = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
}

CommandResult run_verify(const fs::path& source, const fs::path& converted, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"verify", "--source", source.string(), "--converted", converted.string(), "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_moequant(args);
}

// The checkpoint of `source` synthesized into <dir>/src, converted with `method` into <dir>/m
// (merged) and <dir>/t (tree).
void convert_merged_and_tree(const TempDir& dir, const SynthSource& source, const std::string& method) {
    synth_checkpoint(dir / "src", source);
    convert(dir / "src", dir / "m", method, false);
    convert(dir / "src", dir / "t", method, true);
}

// Verifying `converted` against `source` finds a mismatch (exit 6), its report naming every one of `parts`.
void expect_mismatch(const fs::path& source, const fs::path& converted, std::initializer_list<std::string> parts) {
    const CommandResult r = run_verify(source, converted);
    BOOST_TEST(r.exit_code == 6, r.out << r.err);
    for (const std::string& part : parts) BOOST_TEST(contains(r.out, part), r.out);
}

// Flips every bit of the byte at `offset` of a file.
void flip_byte(const fs::path& file, std::uint64_t offset) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(~c);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
}

// The file and absolute byte offset of a tensor's data in a merged output.
std::pair<fs::path, std::uint64_t> tensor_location(const fs::path& merged, const std::string& tensor) {
    const auto index = json::parse(read_text(merged / "model.safetensors.index.json")).as_object();
    const fs::path shard = merged / std::string(index.at("weight_map").at(tensor).as_string());
    SafetensorsFile file = SafetensorsFile::open(shard);
    const TensorView view = file.view(tensor);
    const auto bytes = read_bytes(shard);
    // The data start is found by content: the view's bytes are unique enough in these files.
    const auto begin = std::search(bytes.begin(), bytes.end(), reinterpret_cast<const std::uint8_t*>(view.data()),
                                   reinterpret_cast<const std::uint8_t*>(view.data()) + view.size_bytes());
    BOOST_REQUIRE(begin != bytes.end());
    return {shard, static_cast<std::uint64_t>(begin - bytes.begin())};
}

fs::path first_file(const fs::path& dir, const std::string& fragment) {
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file() && contains(e.path().filename().string(), fragment)) return e.path();
    BOOST_FAIL("no file matching " << fragment << " under " << dir);
    return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(verify)

BOOST_AUTO_TEST_CASE(passes_on_every_family_method_and_format) {
    const std::vector<SynthSource> sources = {
        {"deepseek_v3", "fp8", "per-expert"}, {"kimi_k2", "fp8", "per-expert"},    {"qwen3_next", "bf16", "per-expert"},
        {"glm4_moe", "fp8", "per-expert"},    {"qwen3_moe", "bf16", "fused-bmm"},  {"mixtral", "bf16", "fused-linear"},
        {"mixtral", "bf16", "per-expert"},    {"kimi_k25", "bf16", "per-expert"},
        {"minimax_m2", "fp8", "per-expert"},  {"minimax_m3", "mxfp8", "per-expert"},
    };
    for (const auto& s : sources) {
        TempDir dir;
        synth_checkpoint(dir / "src", s);
        for (const std::string method : {"int4", "int8"})
            for (bool tree : {false, true}) {
                BOOST_TEST_CONTEXT(s.family << " " << s.dtype << " " << s.layout << " " << method << (tree ? " tree" : " merged")) {
                    const fs::path out = dir / (method + (tree ? "t" : "m"));
                    convert(dir / "src", out, method, tree);
                    auto r = run_verify(dir / "src", out, {"--gemv", "--json"});
                    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out << r.err);
                    const auto report = json::parse(r.out).as_object();
                    BOOST_TEST(report.at("passed").as_bool());
                    BOOST_TEST(report.at("quantizer").as_string() == "amx-" + method);
                    BOOST_TEST(report.at("format").as_string() == (tree ? "kt-tree" : "kt-safetensors"));
                    for (const auto& t : report.at("tensors").as_array()) {
                        const auto& o = t.as_object();
                        BOOST_TEST(o.at("bound_use").as_double() <= 1.0);
                        BOOST_TEST(o.at("nan").as_int64() == 0);
                        // The packed product is as close to the source's as the codes allow.
                        BOOST_TEST(o.at("gemv_rows_beyond_bound").as_int64() == 0);
                        BOOST_TEST(o.at("gemv_rel_error").as_double() < (method == "int4" ? 0.3 : 0.03));
                        BOOST_TEST(o.at("rel_rms_error").as_double() < (method == "int4" ? 0.2 : 0.02));
                    }
                }
            }
        // Merged and tree hold the same bytes.
        auto same = run_moequant({"verify", (dir / "int4m").string(), (dir / "int4t").string()});
        BOOST_TEST(same.exit_code == 0, same.out << same.err);
        BOOST_TEST(contains(same.out, "IDENTICAL"), same.out);
    }
}

BOOST_AUTO_TEST_CASE(a_flipped_weight_byte_fails_and_is_named) {
    TempDir dir;
    convert_merged_and_tree(dir, {"deepseek_v3", "fp8", "per-expert"}, "int8");
    const std::string tensor = "blk.1.ffn_down_exps.3.numa.0.weight";
    auto [shard, offset] = tensor_location(dir / "m", tensor);
    flip_byte(shard, offset + 1000);
    expect_mismatch(dir / "src", dir / "m", {"blk.1 expert 3 down part 0", tensor, "beyond the error bound", "FAILED"});

    // The comparison of the two outputs finds the same byte.
    auto cmp = run_moequant({"verify", (dir / "m").string(), (dir / "t").string(), "--json"});
    BOOST_TEST(cmp.exit_code == 6, cmp.out << cmp.err);
    const auto report = json::parse(cmp.out).as_object();
    BOOST_TEST(!report.at("identical").as_bool());
    const auto& differences = report.at("differences").as_array();
    BOOST_REQUIRE_EQUAL(differences.size(), 1u);
    BOOST_TEST(differences[0].at("first_difference").as_int64() == 1000);
    BOOST_TEST(differences[0].at("differing_bytes").as_int64() == 1);
    BOOST_TEST(differences[0].at("tensor").as_string() == "weight");

    // A flipped scale byte in the tree is found too.
    flip_byte(first_file(dir / "t", "INT8_gate_2_"), 0);
    flip_byte(first_file(dir / "t/_layer_2", "INT8_up_1_512Byte_scale"), 2);
    expect_mismatch(dir / "src", dir / "t", {"INT8_up_1_512Byte_scale_.kt"});
}

BOOST_AUTO_TEST_CASE(a_code_kt_multiplies_wrongly_fails_whoever_wrote_it) {
    // kt-kernel's integer products get the sign of INT8 -128 and INT4 -8 wrong, and its
    // quantizer never writes them (docs/kt-arithmetic.md): one such code fails the part.
    TempDir dir;
    synth_checkpoint(dir / "src", {"qwen3_moe", "bf16", "per-expert"});
    convert(dir / "src", dir / "int8", "int8", false);
    auto cal = run_moequant({"convert", "-i", (dir / "src").string(), "-o", (dir / "cal").string(), "--quant-method", "int4",
                             "--calibrate", "--dataset", "embedded", "--num_calibration_samples", "4", "--max_sequence_length", "48",
                             "--quiet"});
    BOOST_REQUIRE_MESSAGE(cal.exit_code == 0, cal.err);
    BOOST_TEST(run_verify(dir / "src", dir / "cal").exit_code == 0);  // its codes keep to -7..7
    const std::string tensor = "blk.1.ffn_up_exps.2.numa.0.weight";
    for (const auto& [folder, lowest, message] :
         {std::tuple{"int8", 0x80, "1 code(s) of -128 in 1 row(s)"}, std::tuple{"cal", 0x08, "code(s) of -8 in 1 row(s)"}}) {
        BOOST_TEST_CONTEXT(folder) {
            auto [shard, offset] = tensor_location(dir / folder, tensor);
            std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(static_cast<std::streamoff>(offset + 700));
            const char byte = static_cast<char>(lowest);
            f.write(&byte, 1);
            f.close();
            expect_mismatch(dir / "src", dir / folder, {"blk.1 expert 2 up part 0", message, "outside kt-kernel's range"});
        }
    }
}

BOOST_AUTO_TEST_CASE(a_moe_int8_column_sum_that_does_not_match_its_codes_fails) {
    // AOCL's int8 GEMM subtracts each row's stored column sum (128 x its codes' sum) from every
    // product (docs/kt-moe-int8.md): a wrong sum fails the part though every code decodes right.
    TempDir dir;
    synth_checkpoint(dir / "src", {"qwen3_moe", "bf16", "per-expert"});
    convert(dir / "src", dir / "moe", "moe_int8", false);
    BOOST_TEST(run_verify(dir / "src", dir / "moe").exit_code == 0);
    const auto config = json::parse(read_text(dir / "src/config.json")).as_object();
    const std::int64_t hidden = config.at("hidden_size").to_number<std::int64_t>();
    const std::string tensor = "blk.1.ffn_up_exps.2.numa.0.weight";
    auto [shard, offset] = tensor_location(dir / "moe", tensor);
    flip_byte(shard, offset + static_cast<std::uint64_t>((hidden + 3) / 4 * 4 * 32 + 4 * 5));  // block 0, row 5's sum
    expect_mismatch(dir / "src", dir / "moe", {"blk.1 expert 2 up part 0", "1 row(s) whose stored column sum is not 128 x their codes' sum",
                                               "first: row 5"});
}

BOOST_AUTO_TEST_CASE(dropped_and_unexpected_tensors_fail) {
    TempDir dir;
    convert_merged_and_tree(dir, {"qwen3_next", "bf16", "per-expert"}, "int4");

    // Merged: a tensor left out of the index is missing.
    auto index = json::parse(read_text(dir / "m/model.safetensors.index.json")).as_object();
    index.at("weight_map").as_object().erase("blk.1.ffn_up_exps.2.numa.1.scale");
    write_text(dir / "m/model.safetensors.index.json", json::serialize(index));
    expect_mismatch(dir / "src", dir / "m", {"blk.1 expert 2 up part 1", "missing tensor 'scale'"});

    // Tree: a whole part gone, and a part the source does not have.
    fs::remove(first_file(dir / "t/_layer_1/_numa_0", "INT4_down_0_"));
    fs::remove(first_file(dir / "t/_layer_1/_numa_0", "INT4_down_0_"));
    fs::copy_file(first_file(dir / "t/_layer_1/_numa_0", "INT4_gate_1_"),
                  dir / "t/_layer_1/_numa_0" / first_file(dir / "t/_layer_1/_numa_0", "INT4_gate_1_").filename().string().replace(10, 1, "9"));
    expect_mismatch(dir / "src", dir / "t",
                    {"blk.1 expert 0 down part 0", "missing from the output",
                     "unexpected part in the output: layer 1 expert 9 gate part 0"});
}

BOOST_AUTO_TEST_CASE(truncated_and_unfinished_outputs_fail_clearly) {
    TempDir dir;
    convert_merged_and_tree(dir, {"mixtral", "bf16", "per-expert"}, "int4");

    // A truncated shard: the safetensors reader names the file.
    const fs::path shard = dir / "m/model-00001-of-00003.safetensors";
    fs::resize_file(shard, fs::file_size(shard) - 100);
    auto r = run_verify(dir / "src", dir / "m");
    BOOST_TEST(r.exit_code == 3, r.out << r.err);
    BOOST_TEST(contains(r.err, "model-00001-of-00003.safetensors"), r.err);

    // A truncated .kt file: that part fails, named by its file.
    const fs::path file = first_file(dir / "t/_layer_0/_numa_1", "INT4_up_3_");
    fs::resize_file(file, fs::file_size(file) - 1);
    expect_mismatch(dir / "src", dir / "t", {file.filename().string(), "bytes but its name says"});

    // No index: the conversion did not finish.
    fs::remove(dir / "m/model.safetensors.index.json");
    auto unfinished = run_verify(dir / "src", dir / "m");
    BOOST_TEST(unfinished.exit_code == 3, unfinished.err);
    BOOST_TEST(contains(unfinished.err, "IncompleteOutput"), unfinished.err);

    // Not an output at all.
    auto source = run_verify(dir / "src", dir / "src");
    BOOST_TEST(source.exit_code == 3, source.err);
    BOOST_TEST(contains(source.err, "UnknownOutput"), source.err);
}

BOOST_AUTO_TEST_CASE(outputs_that_cannot_match_are_refused) {
    TempDir dir;
    synth_checkpoint(dir / "src", {"glm4_moe", "bf16", "per-expert"});
    convert(dir / "src", dir / "int4", "int4", false);
    convert(dir / "src", dir / "int8", "int8", true);
    convert(dir / "src", dir / "int4_t1", "int4", true, 1);
    auto methods = run_moequant({"verify", (dir / "int4").string(), (dir / "int8").string()});
    BOOST_TEST(methods.exit_code == 3, methods.err);
    BOOST_TEST(contains(methods.err, "different methods"), methods.err);
    auto parts = run_moequant({"verify", (dir / "int4").string(), (dir / "int4_t1").string()});
    BOOST_TEST(parts.exit_code == 3, parts.err);
    BOOST_TEST(contains(parts.err, "different threadpool part counts"), parts.err);
    // The T = 1 output verifies against the source on its own.
    BOOST_TEST(run_verify(dir / "src", dir / "int4_t1").exit_code == 0);
    auto usage = run_moequant({"verify", (dir / "int4").string()});
    BOOST_TEST(usage.exit_code == 2, usage.err);
}

BOOST_AUTO_TEST_SUITE_END()
