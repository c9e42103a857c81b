// `synth --preset full`: DeepSeek-V3 at its released sizes, written sparse, and what it is for:
// a dry run that plans a full-size calibration (its hidden states alone 28 GiB) without
// allocating it.

#include "test_support.hpp"

#include <moequant/checkpoint.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace moequant;
using namespace moequant::test;

namespace fs = std::filesystem;

namespace {

// Bytes the file system allocated for the files of `folder`, and their apparent sizes.
std::pair<std::uint64_t, std::uint64_t> allocated_and_apparent(const fs::path& folder) {
    std::uint64_t allocated = 0, apparent = 0;
    for (const auto& entry : fs::directory_iterator(folder)) {
        struct stat st {};
        BOOST_REQUIRE(::stat(entry.path().c_str(), &st) == 0);
        allocated += static_cast<std::uint64_t>(st.st_blocks) * 512;
        apparent += static_cast<std::uint64_t>(st.st_size);
    }
    return {allocated, apparent};
}

fs::path synth_full(const TempDir& dir) {
    const fs::path model = dir / "deepseek-v3";
    const auto r = run_command({host_executable().string(), "synth", "--family", "deepseek_v3", "--preset", "full", "--dtype", "fp8",
                                "--out", model.string()});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return model;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(full_size)

BOOST_AUTO_TEST_CASE(the_full_preset_has_the_release_sizes_in_sparse_files) {
    TempDir dir;
    const fs::path model = synth_full(dir);
    const auto config = boost::json::parse(read_text(model / "config.json")).as_object();
    BOOST_TEST(config.at("hidden_size").as_int64() == 7168);
    BOOST_TEST(config.at("num_hidden_layers").as_int64() == 61);
    BOOST_TEST(config.at("n_routed_experts").as_int64() == 256);
    BOOST_TEST(config.at("moe_intermediate_size").as_int64() == 2048);
    BOOST_TEST(config.at("vocab_size").as_int64() == 129280);  // padded beyond the tokenizer, as the release is

    const Checkpoint checkpoint = Checkpoint::open(model);
    const TensorInfo& down = checkpoint.info("model.layers.60.mlp.experts.255.down_proj.weight");
    BOOST_TEST((down.dtype == DType::F8_E4M3));
    BOOST_TEST((down.shape == Shape{7168, 2048}));
    BOOST_TEST((checkpoint.info("model.layers.60.mlp.experts.255.down_proj.weight_scale_inv").shape == Shape{56, 16}));
    BOOST_TEST((checkpoint.info("model.embed_tokens.weight").shape == Shape{129280, 7168}));
    BOOST_TEST((checkpoint.info("model.layers.0.mlp.gate_proj.weight").shape == Shape{18432, 7168}));
    BOOST_TEST((checkpoint.info("model.layers.3.self_attn.kv_b_proj.weight").shape == Shape{32768, 512}));
    BOOST_TEST(checkpoint.tensor_names().size() == 91992u);

    std::size_t shards = 0;
    for (const auto& entry : fs::directory_iterator(model)) shards += entry.path().extension() == ".safetensors";
    BOOST_TEST(shards == 163u);
    // Every value zero, read back as such; 688 GB on paper, almost nothing on disk.
    const TensorView scale = checkpoint.view("model.layers.3.mlp.experts.0.gate_proj.weight_scale_inv");
    for (std::byte b : scale.bytes) BOOST_REQUIRE(b == std::byte{0});
    const auto [allocated, apparent] = allocated_and_apparent(model);
    BOOST_TEST(apparent > 680'000'000'000ull);
    BOOST_TEST(allocated < 256ull << 20);
}

BOOST_AUTO_TEST_CASE(families_without_release_sizes_refuse_the_full_preset) {
    TempDir dir;
    const auto r = run_command({host_executable().string(), "synth", "--family", "qwen3_moe", "--preset", "full", "--out",
                                (dir / "q").string()});
    BOOST_TEST(r.exit_code == 2);
    BOOST_TEST(r.err.find("--preset full") != std::string::npos);
    BOOST_TEST(!fs::exists(dir / "q"));
}

BOOST_AUTO_TEST_SUITE_END()

// Minutes under ASan for a plan the release build checks: registered without the sanitizers.
BOOST_AUTO_TEST_SUITE(full_size_dry_run)

BOOST_AUTO_TEST_CASE(a_full_size_gptq_is_planned_without_allocating_its_hidden_states) {
    TempDir dir;
    const fs::path model = synth_full(dir);
    // 512 rows, each long enough for 2048 tokens: the projection's 512 x 2048.
    const fs::path data = dir / "calibration.jsonl";
    {
        std::string text;
        while (text.size() < 16000) text += "The quick brown fox jumps over the lazy dog, and then it rests by the river bank. ";
        std::ofstream out(data);
        for (int i = 0; i < 512; ++i) out << "{\"text\": \"" << i << " " << text << "\"}\n";
    }
    const auto r = run_command({host_executable().string(), "gptq", "--model_id", model.string(), "--output_dir",
                                (dir / "out").string(), "--quant_type", "W4A16", "--dataset", data.string(), "--dry-run"});
    // The output (346 GiB) fits few disks: then the plan is printed and refused as the run would be.
    BOOST_TEST((r.exit_code == 0 || r.exit_code == 5), r.err);
    BOOST_TEST(r.out.find("28.0 GiB  the samples' hidden states") != std::string::npos, r.out);
    BOOST_TEST(r.out.find("58 MoE layer(s) (3-60) x 256 routed experts") != std::string::npos);
    BOOST_TEST(r.out.find("one expert quantized on 1048576 tokens") != std::string::npos);
    BOOST_TEST(r.out.find("time: about") != std::string::npos);
    // The layer's MLP inputs in float32: reported, not required, by the dry run.
    BOOST_TEST(r.out.find("scratch files in ") != std::string::npos);
    BOOST_TEST(r.out.find(": 28.0 GiB at most") != std::string::npos);
    BOOST_TEST(!fs::exists(dir / "out" / "model.safetensors.index.json"));
}

BOOST_AUTO_TEST_SUITE_END()
