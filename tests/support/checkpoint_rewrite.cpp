#include "checkpoint_rewrite.hpp"

#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/safetensors_reader.hpp>
#include <moequant/sharded_writer.hpp>

#include <map>

namespace moequant::test {

namespace json = boost::json;

void rewrite(const fs::path& from, const fs::path& to,
             const std::function<bool(const std::string&, std::optional<Replacement>&)>& edit,
             const std::function<void(json::object&)>& config_edit) {
    fs::create_directories(to);
    for (const auto& e : fs::directory_iterator(from))
        if (e.path().extension() != ".safetensors" && e.path().filename() != "model.safetensors.index.json")
            fs::copy_file(e.path(), to / e.path().filename());
    if (config_edit) {
        auto config = json::parse(read_text(to / "config.json")).as_object();
        config_edit(config);
        write_text(to / "config.json", json::serialize(config));
    }
    Checkpoint source = Checkpoint::open(from);
    ShardedSafetensorsWriter out(to);
    for (const auto& shard_name : source.shard_names()) {
        const SafetensorsFile& shard = source.shard(shard_name);
        std::vector<TensorSpec> specs;
        std::map<std::string, std::vector<std::uint8_t>> data;
        for (const auto& t : shard.tensors()) {
            std::optional<Replacement> replacement;
            if (!edit(t.name, replacement)) continue;
            if (replacement) {
                specs.push_back(replacement->spec);
                data[replacement->spec.name] = replacement->bytes;
            } else {
                specs.push_back({t.name, t.dtype, t.shape});
                auto v = shard.view(t);
                data[t.name].assign(reinterpret_cast<const std::uint8_t*>(v.data()),
                                    reinterpret_cast<const std::uint8_t*>(v.data()) + v.size_bytes());
            }
        }
        SafetensorsWriter w = out.open_shard(shard_name, specs);
        for (const auto& s : specs) w.write(s.name, std::as_bytes(std::span<const std::uint8_t>(data[s.name])));
        w.finish();
    }
    out.write_index();
}

void edit_tensor_bytes(const fs::path& dir, const std::string& tensor,
                       const std::function<void(std::uint8_t*, std::size_t)>& edit) {
    const auto index = json::parse(read_text(dir / "model.safetensors.index.json")).as_object();
    const fs::path shard = dir / std::string(index.at("weight_map").at(tensor).as_string());
    std::vector<std::uint8_t> bytes = read_bytes(shard);
    SafetensorsFile file = SafetensorsFile::open(shard);
    const TensorInfo& info = file.info(tensor);
    edit(bytes.data() + file.data_start() + info.begin, info.size_bytes());
    write_bytes(shard, bytes);
}

void rewrite_config(const fs::path& from, const fs::path& to, const std::function<void(boost::json::object&)>& config_edit) {
    rewrite(from, to, [](const std::string&, std::optional<Replacement>&) { return true; }, config_edit);
}

void rewrite_as_zeros(const fs::path& from, const fs::path& to, const std::string& tensor, DType dtype, const Shape& shape) {
    const std::size_t bytes = dtype_byte_size(dtype, shape_elements(shape).value()).value();
    rewrite(from, to, [&](const std::string& name, std::optional<Replacement>& r) {
        if (name == tensor) r = Replacement{{name, dtype, shape}, std::vector<std::uint8_t>(bytes, 0)};
        return true;
    });
}

}  // namespace moequant::test
