#include <moequant/error.hpp>
#include <moequant/output_file.hpp>
#include <moequant/sharded_writer.hpp>

#include "base/json_text.hpp"

#include <cstdio>
#include <map>

namespace moequant {

std::string shard_file_name(std::size_t index, std::size_t count) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index, count);
    return buf;
}

struct ShardedSafetensorsWriter::Impl {
    std::filesystem::path directory;
    Metadata metadata;
    std::map<std::string, std::string> weight_map;  // tensor -> shard file (sorted, as written)
    std::vector<std::string> shards;
    std::uint64_t total_size = 0;

    void record(const std::string& file_name, const std::vector<TensorInfo>& layout) {
        if (file_name.empty() || file_name.find('/') != std::string::npos || file_name == "." || file_name == "..")
            throw Error(ErrorKind::internal, "shard name must be a plain file name", {.file = file_name});
        for (const auto& s : shards)
            if (s == file_name) throw Error(ErrorKind::internal, "shard opened twice", {.file = file_name});
        for (const auto& t : layout) {
            auto [it, inserted] = weight_map.emplace(t.name, file_name);
            if (!inserted)
                throw Error(ErrorKind::internal, "tensor is planned in two shards (" + it->second + ")",
                            {.file = file_name, .tensor = t.name});
            total_size += t.size_bytes();
        }
        shards.push_back(file_name);
    }
};

ShardedSafetensorsWriter::ShardedSafetensorsWriter(std::filesystem::path directory, Metadata shard_metadata)
    : impl_(std::make_unique<Impl>()) {
    impl_->directory = std::move(directory);
    impl_->metadata = std::move(shard_metadata);
}

ShardedSafetensorsWriter::~ShardedSafetensorsWriter() = default;

SafetensorsWriter ShardedSafetensorsWriter::open_shard(const std::string& file_name, std::vector<TensorSpec> tensors,
                                                       std::optional<Metadata> metadata) {
    SafetensorsWriter writer(impl_->directory / file_name, std::move(tensors), metadata ? *metadata : impl_->metadata);
    impl_->record(file_name, writer.layout());
    return writer;
}

void ShardedSafetensorsWriter::adopt_shard(const std::string& file_name) {
    SafetensorsFile existing = SafetensorsFile::open(impl_->directory / file_name);
    impl_->record(file_name, existing.tensors());
}

void ShardedSafetensorsWriter::write_index() {
    for (const auto& s : impl_->shards)
        if (!std::filesystem::exists(impl_->directory / s))
            throw Error(ErrorKind::internal, "the index would name a shard that was not finished",
                        {.file = (impl_->directory / s).string()});
    std::string text = "{\n  \"metadata\": {\n    \"total_size\": " + std::to_string(impl_->total_size) +
                       "\n  },\n  \"weight_map\": {";
    bool first = true;
    for (const auto& [tensor, shard] : impl_->weight_map) {
        text += first ? "\n    " : ",\n    ";
        first = false;
        detail::append_json_string(text, tensor);
        text += ": ";
        detail::append_json_string(text, shard);
    }
    text += first ? "}\n}\n" : "\n  }\n}\n";
    write_file_atomically(impl_->directory / safetensors_index_name, text);
}

std::uint64_t ShardedSafetensorsWriter::total_size() const noexcept { return impl_->total_size; }

}  // namespace moequant
