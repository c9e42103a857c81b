#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/sharded_writer.hpp>

#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace moequant;
using namespace moequant::test;

namespace {

void write_shard(ShardedSafetensorsWriter& sharded, const std::string& name, const std::vector<std::string>& tensors) {
    std::vector<TensorSpec> specs;
    for (const auto& t : tensors) specs.push_back({t, DType::F32, {2}});
    SafetensorsWriter w = sharded.open_shard(name, specs);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        float v[2] = {static_cast<float>(i), 0.5f};
        w.write(tensors[i], std::as_bytes(std::span<float>(v)));
    }
    w.finish();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sharded_writer)

BOOST_AUTO_TEST_CASE(shard_names_follow_transformers) {
    BOOST_TEST(shard_file_name(1, 4) == "model-00001-of-00004.safetensors");
    BOOST_TEST(shard_file_name(12, 163) == "model-00012-of-00163.safetensors");
}

BOOST_AUTO_TEST_CASE(index_is_written_last_and_opens_as_a_checkpoint) {
    TempDir dir;
    ShardedSafetensorsWriter sharded(dir.path());
    write_shard(sharded, shard_file_name(1, 2), {"model.b", "model.a"});
    BOOST_TEST(!fs::exists(dir / safetensors_index_name));
    write_shard(sharded, shard_file_name(2, 2), {"lm_head.weight"});
    sharded.write_index();
    BOOST_TEST(sharded.total_size() == 24u);
    BOOST_TEST(read_text(dir / safetensors_index_name) ==
               "{\n  \"metadata\": {\n    \"total_size\": 24\n  },\n  \"weight_map\": {\n"
               "    \"lm_head.weight\": \"model-00002-of-00002.safetensors\",\n"
               "    \"model.a\": \"model-00001-of-00002.safetensors\",\n"
               "    \"model.b\": \"model-00001-of-00002.safetensors\"\n  }\n}\n");
    auto ckpt = Checkpoint::open(dir.path());
    ckpt.validate_all();
    BOOST_TEST(ckpt.tensor_names().size() == 3u);
    BOOST_TEST(ckpt.shard_of("lm_head.weight") == "model-00002-of-00002.safetensors");
}

BOOST_AUTO_TEST_CASE(finished_shards_can_be_adopted_on_resume) {
    TempDir dir;
    {
        ShardedSafetensorsWriter first_run(dir.path());
        write_shard(first_run, shard_file_name(1, 2), {"x"});
        // interrupted here: no second shard, no index
    }
    ShardedSafetensorsWriter second_run(dir.path());
    second_run.adopt_shard(shard_file_name(1, 2));
    write_shard(second_run, shard_file_name(2, 2), {"y"});
    second_run.write_index();
    auto ckpt = Checkpoint::open(dir.path());
    BOOST_TEST(ckpt.shard_of("x") == shard_file_name(1, 2));
    BOOST_TEST(ckpt.shard_of("y") == shard_file_name(2, 2));
}

BOOST_AUTO_TEST_CASE(index_refuses_unfinished_shards_and_duplicate_tensors) {
    TempDir dir;
    ShardedSafetensorsWriter sharded(dir.path());
    {
        SafetensorsWriter unfinished = sharded.open_shard("a.safetensors", {{"t", DType::U8, {1}}});
    }
    BOOST_CHECK_THROW(sharded.write_index(), Error);
    BOOST_TEST(!fs::exists(dir / safetensors_index_name));
    ShardedSafetensorsWriter other(dir.path());
    write_shard(other, "b.safetensors", {"t"});
    BOOST_CHECK_THROW(write_shard(other, "c.safetensors", {"t"}), Error);
}

BOOST_AUTO_TEST_SUITE_END()
