// PyTorch .bin checkpoints end to end, on the files torch 1.13 wrote (tests/data/torch, made by
// scripts/make-torch-fixture.py): `moequant inspect` lists what it lists for the safetensors
// twin, Checkpoint views hold the twin's bytes, a synthesized model rewritten as .bin shards
// converts to the same bytes as its safetensors original, and the hostile files (an os.system
// payload, an unknown global, a truncated zip, a strided tensor) end with exit 3 and one line
// naming the file and the problem, without running anything.

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>

#include "pickle_writer.hpp"
#include "test_support.hpp"
#include "zip_writer.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

using namespace moequant::test;
namespace json = boost::json;

namespace {

const fs::path torch_data = fs::path(MOEQUANT_SOURCE_DIR) / "tests/data/torch";
const fs::path side_effect = "/tmp/moequant-pwned-os-system";  // what the os.system payload would create

// (name, dtype, shape, bytes) of every tensor `inspect --json --tensors` lists.
using Listing = std::set<std::tuple<std::string, std::string, std::string, std::uint64_t>>;

Listing inspect_tensors(const fs::path& path) {
    const CommandResult r = run_moequant({"inspect", "--json", "--tensors", "--headers-only", path.string()});
    BOOST_TEST_REQUIRE(r.exit_code == 0, path << ": " << r.err);
    const json::object root = json::parse(r.out).as_object();
    Listing out;
    for (const auto& row : root.at("tensor_list").as_array()) {
        const json::object& t = row.as_object();
        out.emplace(std::string(t.at("name").as_string()), std::string(t.at("dtype").as_string()),
                    json::serialize(t.at("shape")), t.at("bytes").to_number<std::uint64_t>());
    }
    BOOST_TEST(root.at("tensors").to_number<std::uint64_t>() == out.size());
    return out;
}

void expect_refused(const fs::path& path, const std::vector<std::string>& parts) {
    const CommandResult r = run_moequant({"inspect", path.string()});
    BOOST_TEST(r.exit_code == 3, path << ": exit " << r.exit_code << ", stderr: " << r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    BOOST_TEST(r.err.rfind("moequant: error: ", 0) == 0u, r.err);
    BOOST_TEST(r.out.empty(), r.out);
    for (const auto& p : parts) BOOST_TEST(contains(r.err, p), "missing '" << p << "' in: " << r.err);
}

// Rewrites a safetensors checkpoint the way torch.save would have written its state dicts: one
// pytorch_model-*.bin per shard (each tensor its own storage, the OrderedDict with _metadata,
// records aligned to 64 bytes), the .bin index, and the side files.
void write_as_bin(const fs::path& from, const fs::path& to) {
    static const std::map<moequant::DType, std::string> storage_types = {
        {moequant::DType::BF16, "BFloat16Storage"}, {moequant::DType::F16, "HalfStorage"},
        {moequant::DType::F32, "FloatStorage"}, {moequant::DType::I64, "LongStorage"}};
    fs::create_directories(to);
    for (const auto& entry : fs::directory_iterator(from))
        if (entry.path().extension() == ".json" && entry.path().filename() != "model.safetensors.index.json")
            fs::copy_file(entry.path(), to / entry.path().filename());
    const moequant::Checkpoint source = moequant::Checkpoint::open(from);
    json::object weight_map;
    const std::size_t count = source.shard_names().size();
    for (std::size_t i = 0; i < count; ++i) {
        char name[64];
        std::snprintf(name, sizeof name, "pytorch_model-%05zu-of-%05zu", i + 1, count);
        const moequant::SafetensorsFile& shard = source.shard(source.shard_names()[i]);
        std::vector<PickledTensorSpec> specs;
        std::map<std::string, std::vector<std::uint8_t>> storages;
        for (std::size_t k = 0; k < shard.tensors().size(); ++k) {
            const moequant::TensorInfo& t = shard.tensors()[k];
            const std::string key = std::to_string(k);
            specs.push_back({t.name, storage_types.at(t.dtype), key, static_cast<std::int64_t>(t.elements()), 0, t.shape, {}});
            const moequant::TensorView v = shard.view(t);
            storages[key].assign(reinterpret_cast<const std::uint8_t*>(v.data()), reinterpret_cast<const std::uint8_t*>(v.data()) + v.size_bytes());
            weight_map[t.name] = std::string(name) + ".bin";
        }
        ZipWriter zip({.zip64 = true, .data_descriptors = true});
        zip.add(std::string(name) + "/data.pkl", state_dict_pickle(specs, true));
        for (const auto& [key, bytes] : storages) zip.add(std::string(name) + "/data/" + key, bytes);
        zip.add(std::string(name) + "/version", std::string("3\n"));
        write_bytes(to / (std::string(name) + ".bin"), zip.finish());
    }
    write_text(to / "pytorch_model.bin.index.json", json::serialize(json::object{{"metadata", json::object{}}, {"weight_map", weight_map}}));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(torch_bin)

BOOST_AUTO_TEST_CASE(inspect_lists_the_twins_tensors) {
    const Listing twin = inspect_tensors(torch_data / "twin/model.safetensors");
    BOOST_TEST(twin.size() == 15u);
    BOOST_TEST((inspect_tensors(torch_data / "single/pytorch_model.bin") == twin));
    BOOST_TEST((inspect_tensors(torch_data / "single") == twin));
    BOOST_TEST((inspect_tensors(torch_data / "sharded") == twin));
    BOOST_TEST((inspect_tensors(torch_data / "sharded/pytorch_model.bin.index.json") == twin));

    const CommandResult text = run_moequant({"inspect", (torch_data / "sharded").string()});
    BOOST_TEST(text.exit_code == 0, text.err);
    BOOST_TEST(contains(text.out, "(index pytorch_model.bin.index.json)"), text.out);
    BOOST_TEST(contains(text.out, "shards: 2  tensors: 15"), text.out);
    BOOST_TEST(contains(text.out, "headers: 0 bytes"), text.out);  // a .bin has no safetensors header
}

BOOST_AUTO_TEST_CASE(checkpoint_views_hold_the_twins_bytes) {
    const moequant::Checkpoint twin = moequant::Checkpoint::open(torch_data / "twin");
    for (const fs::path& path : {torch_data / "single/pytorch_model.bin", torch_data / "sharded"}) {
        const moequant::Checkpoint bin = moequant::Checkpoint::open(path);
        bin.validate_all();
        BOOST_TEST((bin.tensor_names() == twin.tensor_names()), path);
        for (const std::string& name : twin.tensor_names()) {
            const moequant::TensorView a = bin.view(name), b = twin.view(name);
            BOOST_TEST((a.dtype == b.dtype), name);
            BOOST_TEST((a.shape == b.shape), name);
            BOOST_TEST_REQUIRE(a.size_bytes() == b.size_bytes(), name);
            if (a.size_bytes() > 0) BOOST_TEST(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0, path << ": " << name);
        }
    }
}

BOOST_AUTO_TEST_CASE(convert_from_bin_writes_what_convert_from_safetensors_writes) {
    TempDir dir;
    const CommandResult synth = run_moequant({"synth", "--family", "qwen3_moe", "--dtype", "bf16", "--out", (dir / "st").string()});
    BOOST_TEST_REQUIRE(synth.exit_code == 0, synth.err);
    write_as_bin(dir / "st", dir / "bin");
    for (const char* model : {"st", "bin"}) {
        const CommandResult r = run_moequant({"convert", "-i", (dir / model).string(), "-o", (dir / (std::string(model) + ".out")).string(), "--quiet"});
        BOOST_TEST_REQUIRE(r.exit_code == 0, model << ": " << r.err);
    }
    const auto from_safetensors = file_hashes(dir / "st.out"), from_bin = file_hashes(dir / "bin.out");
    BOOST_TEST(!from_bin.empty());
    BOOST_TEST((from_bin == from_safetensors));
    const CommandResult verify = run_moequant({"verify", "--source", (dir / "bin").string(), "--converted", (dir / "bin.out").string()});
    BOOST_TEST(verify.exit_code == 0, verify.out << verify.err);
}

BOOST_AUTO_TEST_CASE(hostile_files_exit_3_naming_the_file_and_the_problem) {
    std::error_code ec;
    fs::remove(side_effect, ec);
    const fs::path hostile = torch_data / "hostile";
    expect_refused(hostile / "os_system.bin", {(hostile / "os_system.bin").string(), "refusing global 'posix.system'", "UnsafeGlobal"});
    expect_refused(hostile / "unknown_global.bin",
                   {(hostile / "unknown_global.bin").string(), "refusing global 'torch.nn.modules.linear.Linear'"});
    expect_refused(hostile / "truncated.bin", {(hostile / "truncated.bin").string(), "truncated", "NotAZipArchive"});
    expect_refused(hostile / "noncontiguous.bin",
                   {(hostile / "noncontiguous.bin").string(), "tensor 'w'", "stride [1,3]", "NonContiguousTensor"});

    // The payload under the name a model folder uses, and sharded behind an index.
    TempDir dir;
    fs::create_directory(dir / "model");
    fs::copy_file(hostile / "os_system.bin", dir / "model/pytorch_model.bin");
    expect_refused(dir / "model", {"pytorch_model.bin", "'posix.system'"});
    fs::create_directory(dir / "sharded");
    fs::copy_file(torch_data / "sharded/pytorch_model-00001-of-00002.bin", dir / "sharded/pytorch_model-00001-of-00002.bin");
    fs::copy_file(hostile / "os_system.bin", dir / "sharded/pytorch_model-00002-of-00002.bin");
    fs::copy_file(torch_data / "sharded/pytorch_model.bin.index.json", dir / "sharded/pytorch_model.bin.index.json");
    expect_refused(dir / "sharded", {"pytorch_model-00002-of-00002.bin", "'posix.system'"});

    BOOST_TEST(!fs::exists(side_effect), "the os.system payload ran");
}

BOOST_AUTO_TEST_SUITE_END()
