// Opening checkpoints through the index (never by globbing), single files, and the ways an
// index and its shards can disagree.

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/safetensors_writer.hpp>
#include <moequant/sharded_writer.hpp>

#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace moequant;
using namespace moequant::test;

namespace {

void write_file(const fs::path& path, const std::vector<std::string>& tensors) {
    std::vector<TensorSpec> specs;
    for (const auto& t : tensors) specs.push_back({t, DType::U8, {2}});
    SafetensorsWriter w(path, specs);
    for (const auto& t : tensors) {
        std::uint8_t v[2] = {static_cast<std::uint8_t>(t.size()), 9};
        w.write(t, std::as_bytes(std::span<std::uint8_t>(v)));
    }
    w.finish();
}

void write_index(const fs::path& dir, const std::string& weight_map_body) {
    write_text(dir / "model.safetensors.index.json",
               "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {" + weight_map_body + "}}");
}

Error open_error(const fs::path& path) {
    try {
        Checkpoint::open(path).validate_all();
    } catch (const Error& e) {
        return e;
    }
    BOOST_FAIL("expected an error for " << path);
    throw;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(jl_sharded_set_opens_through_its_index) {
    auto dir = fixtures_dir() / "safetensors_jl_testdata/sharded";
    auto ckpt = Checkpoint::open(dir);
    BOOST_TEST(ckpt.index_path().has_value());
    BOOST_TEST(ckpt.shard_names().size() == 6u);
    BOOST_TEST(ckpt.tensor_names().size() == 36u);
    ckpt.validate_all();
    std::uint64_t total = 0;
    for (const auto& name : ckpt.tensor_names()) total += ckpt.info(name).size_bytes();
    BOOST_TEST(total == 4305u);  // metadata.total_size of the index
    BOOST_TEST(ckpt.shard_of("float32_357") == "model-00002-of-00006.safetensors");
    BOOST_TEST(ckpt.view("float32_357").size_bytes() == 420u);
    // The index file itself can be given too.
    BOOST_TEST(Checkpoint::open(dir / "model.safetensors.index.json").tensor_names().size() == 36u);
}

BOOST_AUTO_TEST_CASE(single_file_and_folder_with_model_safetensors) {
    TempDir dir;
    write_file(dir / "model.safetensors", {"a", "bb"});
    auto by_folder = Checkpoint::open(dir.path());
    BOOST_TEST(!by_folder.index_path().has_value());
    BOOST_TEST((by_folder.tensor_names() == std::vector<std::string>{"a", "bb"}));
    auto by_file = Checkpoint::open(dir / "model.safetensors");
    BOOST_TEST(static_cast<int>(by_file.view("bb").data()[0]) == 2);
}

BOOST_AUTO_TEST_CASE(weight_and_scale_in_different_shards_are_found) {
    TempDir dir;
    write_file(dir / "model-00001-of-000002.safetensors", {"layers.39.w.weight"});
    write_file(dir / "model-00002-of-000002.safetensors", {"layers.39.w.weight_scale_inv"});
    write_index(dir.path(), R"("layers.39.w.weight": "model-00001-of-000002.safetensors",
                               "layers.39.w.weight_scale_inv": "model-00002-of-000002.safetensors")");
    auto ckpt = Checkpoint::open(dir.path());
    BOOST_TEST(ckpt.shard_of("layers.39.w.weight_scale_inv") == "model-00002-of-000002.safetensors");
    BOOST_TEST(ckpt.info("layers.39.w.weight").size_bytes() == 2u);
    BOOST_TEST(ckpt.info("layers.39.w.weight_scale_inv").size_bytes() == 2u);
}

BOOST_AUTO_TEST_CASE(unreferenced_safetensors_files_are_ignored) {
    TempDir dir;
    write_file(dir / "model-1-of-1.safetensors", {"t"});
    write_file(dir / "consolidated.safetensors", {"other"});
    fs::create_directory(dir / "original");
    write_file(dir / "original" / "model.safetensors", {"nested"});
    write_index(dir.path(), R"("t": "model-1-of-1.safetensors")");
    auto ckpt = Checkpoint::open(dir.path());
    ckpt.validate_all();
    BOOST_TEST((ckpt.shard_names() == std::vector<std::string>{"model-1-of-1.safetensors"}));
    BOOST_TEST(!ckpt.contains("other"));
    BOOST_TEST(!ckpt.contains("nested"));
}

BOOST_AUTO_TEST_CASE(index_naming_a_missing_shard_is_an_input_error) {
    TempDir dir;
    write_file(dir / "a.safetensors", {"t"});
    write_index(dir.path(), R"("t": "a.safetensors", "u": "model-00003-of-00006.safetensors")");
    Error e = open_error(dir.path());
    BOOST_TEST((e.kind() == ErrorKind::input));
    BOOST_TEST(std::string(e.what()).find("model-00003-of-00006.safetensors") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("model.safetensors.index.json") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(index_naming_a_tensor_absent_from_its_shard_is_an_input_error) {
    TempDir dir;
    write_file(dir / "a.safetensors", {"t"});
    write_index(dir.path(), R"("t": "a.safetensors", "ghost": "a.safetensors")");
    auto ckpt = Checkpoint::open(dir.path());
    try {
        ckpt.view("ghost");
        BOOST_FAIL("expected an error");
    } catch (const Error& e) {
        BOOST_TEST(e.code() == "IndexMismatch");
        BOOST_TEST(e.context().tensor == "ghost");
        BOOST_TEST(std::string(e.what()).find("a.safetensors") != std::string::npos);
    }
    BOOST_TEST(open_error(dir.path()).code() == "IndexMismatch");
}

BOOST_AUTO_TEST_CASE(shard_tensor_missing_from_index_fails_validation) {
    TempDir dir;
    write_file(dir / "a.safetensors", {"t", "extra"});
    write_index(dir.path(), R"("t": "a.safetensors")");
    Error e = open_error(dir.path());
    BOOST_TEST(e.code() == "IndexMismatch");
    BOOST_TEST(e.context().tensor == "extra");
}

BOOST_AUTO_TEST_CASE(shard_names_must_stay_inside_the_model_folder) {
    TempDir dir;
    for (const char* bad : {"../outside.safetensors", "/etc/passwd", "sub/../../x.safetensors"}) {
        write_index(dir.path(), std::string("\"t\": \"") + bad + "\"");
        Error e = open_error(dir.path());
        BOOST_TEST(e.code() == "InvalidIndex", bad);
    }
}

BOOST_AUTO_TEST_CASE(malformed_index_files_are_named) {
    TempDir dir;
    write_text(dir / "model.safetensors.index.json", "{not json");
    BOOST_TEST(open_error(dir.path()).code() == "InvalidIndex");
    write_text(dir / "model.safetensors.index.json", R"({"metadata": {}})");
    BOOST_TEST(std::string(open_error(dir.path()).what()).find("weight_map") != std::string::npos);
    write_text(dir / "model.safetensors.index.json", R"({"weight_map": {"t": 3}})");
    BOOST_TEST(open_error(dir.path()).context().code == "InvalidIndex");
}

BOOST_AUTO_TEST_CASE(an_empty_weight_map_is_an_empty_checkpoint) {
    TempDir dir;
    write_index(dir.path(), "");
    auto ckpt = Checkpoint::open(dir.path());
    ckpt.validate_all();
    BOOST_TEST(ckpt.tensor_count() == 0u);
    BOOST_TEST(ckpt.shard_names().empty());
    try {
        ckpt.info("w");
        BOOST_FAIL("expected an error");
    } catch (const Error& e) {
        BOOST_TEST(e.code() == "TensorNotFound");
    }
}

BOOST_AUTO_TEST_CASE(a_folder_without_a_checkpoint_says_what_was_looked_for) {
    TempDir dir;
    write_file(dir / "model-00001-of-00002.safetensors", {"t"});
    Error e = open_error(dir.path());
    BOOST_TEST(e.code() == "NoCheckpoint");
    BOOST_TEST(std::string(e.what()).find("model.safetensors.index.json") != std::string::npos);
    BOOST_TEST(e.context().hint.find("1 other") != std::string::npos);
    BOOST_TEST(open_error(dir / "does-not-exist").code() == "NoCheckpoint");
}

BOOST_AUTO_TEST_CASE(a_bad_shard_reports_the_shard_file) {
    TempDir dir;
    write_bytes(dir / "a.safetensors", {1, 2, 3});
    write_index(dir.path(), R"("t": "a.safetensors")");
    Error e = open_error(dir.path());
    BOOST_TEST(e.code() == "HeaderTooSmall");
    BOOST_TEST(e.context().file == (dir / "a.safetensors").string());
}

BOOST_AUTO_TEST_CASE(config_json_is_read_from_the_model_folder) {
    TempDir dir;
    write_file(dir / "model.safetensors", {"t"});
    auto ckpt = Checkpoint::open(dir.path());
    BOOST_TEST(!ckpt.has_config());
    BOOST_CHECK_THROW(ckpt.config(), Error);
    write_text(dir / "config.json", R"({"model_type": "mixtral"})");
    BOOST_TEST(ckpt.has_config());
    BOOST_TEST(ckpt.config().model_type() == "mixtral");
}

BOOST_AUTO_TEST_SUITE_END()
