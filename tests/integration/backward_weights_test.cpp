// convert --save-backward-weights (kt-kernel's SFT backward weights) as a user meets it: verify
// decodes them against the source transposed and names a damaged or missing one, a rerun keeps
// the layers it completed, a run without the flag is another job, and what cannot hold or make
// them is refused before any file (exit 2). Their bytes: convert_test.cpp; the dry run's
// sizes: dry_run_test.cpp; kt-kernel's own vectors: the golden suite.
#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>


using namespace moequant::test;

namespace {

std::vector<std::string> convert_args(const fs::path& src, const fs::path& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"convert", "-i", src.string(), "-o", out.string(), "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

CommandResult verify(const fs::path& src, const fs::path& out) {
    return run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
}

// The first backward quant file of layer folder `layer`, part 0.
fs::path first_backward_file(const fs::path& tree) {
    for (const auto& layer : fs::directory_iterator(tree))
        if (layer.path().filename().string().starts_with("_layer_"))
            for (const auto& f : fs::directory_iterator(layer.path() / "_numa_0"))
                if (f.path().filename().string().find("_gate_bwd_0_") != std::string::npos &&
                    f.path().filename().string().ends_with("quant_.kt"))
                    return f.path();
    return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(backward_weights)

BOOST_AUTO_TEST_CASE(verify_checks_them_and_reruns_keep_them) {
    TempDir dir;
    const fs::path src = dir / "src";
    synth_checkpoint(src, {"qwen3_moe", "bf16", "per-expert"});
    for (const std::string method : {"int4", "int8"}) {
        BOOST_TEST_CONTEXT(method) {
            const fs::path merged = dir / (method + "m"), tree = dir / (method + "t");
            const auto merged_args = convert_args(src, merged, {"--quant-method", method, "--save-backward-weights"});
            auto tree_args = convert_args(src, tree, {"--quant-method", method, "--save-backward-weights", "--no-merge-safetensor"});
            BOOST_REQUIRE(run_moequant(merged_args).exit_code == 0);
            BOOST_REQUIRE(run_moequant(tree_args).exit_code == 0);
            for (const fs::path& out : {merged, tree}) {
                auto v = verify(src, out);
                BOOST_TEST(v.exit_code == 0, out << ": " << v.out << v.err);
            }
            // Both formats hold the same parts, backward tensors included.
            auto same = run_moequant({"verify", merged.string(), tree.string()});
            BOOST_TEST(same.exit_code == 0, same.out << same.err);
            BOOST_TEST(contains(same.out, "IDENTICAL"), same.out);

            // The same command again keeps every layer; without the flag it is another job.
            const auto before = file_hashes(merged);
            auto again = run_moequant(merged_args);
            BOOST_TEST(again.exit_code == 0, again.err);
            BOOST_TEST(contains(again.out, "completed earlier"), again.out);
            BOOST_TEST((file_hashes(merged) == before));
            auto other = run_moequant(convert_args(src, merged, {"--quant-method", method}));
            BOOST_TEST(other.exit_code == 5, other.err);
            BOOST_TEST(contains(other.err, "another conversion"), other.err);

            // A damaged backward file: verify names its part and says it is the backward weights.
            const fs::path victim = first_backward_file(tree);
            BOOST_REQUIRE(!victim.empty());
            auto bytes = read_bytes(victim);
            for (std::size_t i = 0; i < 64; ++i) bytes[i] ^= 0x33;
            write_bytes(victim, bytes);
            auto damaged = verify(src, tree);
            BOOST_TEST(damaged.exit_code != 0, damaged.out);
            BOOST_TEST(contains(damaged.out + damaged.err, "backward weights:"), damaged.out << damaged.err);
            BOOST_TEST(contains(damaged.out + damaged.err, "gate part 0"), damaged.out << damaged.err);
            // A missing one: the part lacks a tensor its layout has.
            fs::remove(victim);
            auto missing = verify(src, tree);
            BOOST_TEST(missing.exit_code != 0, missing.out);
            BOOST_TEST(contains(missing.out + missing.err, "missing tensor 'backward.weight'"), missing.out << missing.err);
        }
    }
}

// What cannot make or hold them is refused by name before any file; moe_int8, which kt-kernel
// has no SFT method for, converts with a note and no backward weights (as kt's script does).
BOOST_AUTO_TEST_CASE(refusals_and_the_moe_int8_note) {
    TempDir dir;
    const fs::path src = dir / "src";
    synth_checkpoint(src, {"qwen3_moe", "bf16", "per-expert"});
    const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
        {{"--format", "bf16-safetensors"}, "format 'bf16-safetensors' writes no quantized experts"},
        {{"--quantizer", "moe-int8"}, "quantizer 'moe-int8' makes no backward weights"},
        {{"--calibrate", "--dataset", "embedded"}, "--save-backward-weights has no --calibrate variant"},
        {{"--format", "compressed-tensors", "--quantizer", "rtn", "--threadpool-count", "1"},
         "compressed-tensors has no place for kt-kernel's SFT backward weights"},
    };
    for (const auto& [extra, message] : refused) {
        auto args = convert_args(src, dir / "refused", extra);
        args.push_back("--save-backward-weights");
        auto r = run_moequant(args);
        BOOST_TEST(r.exit_code == 2, extra.front() << " " << extra.back() << ": " << r.err);
        BOOST_TEST(contains(r.err, message), r.err);
        BOOST_TEST(!fs::exists(dir / "refused"));
    }
    auto moe = run_moequant({"convert", "-i", src.string(), "-o", (dir / "moe").string(), "--quant-method", "moe_int8",
                             "--save-backward-weights", "--no-merge-safetensor"});  // not --quiet: the note is progress output
    BOOST_TEST(moe.exit_code == 0, moe.err);
    BOOST_TEST(contains(moe.err, "--save-backward-weights: MOE_INT8 has no SFT method"), moe.err);
    std::size_t files = 0, backward = 0;
    for (const auto& f : fs::recursive_directory_iterator(dir / "moe")) {
        files += f.is_regular_file();
        backward += f.path().filename().string().find("_bwd_") != std::string::npos;
    }
    BOOST_TEST(files > 0u);
    BOOST_TEST(backward == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
