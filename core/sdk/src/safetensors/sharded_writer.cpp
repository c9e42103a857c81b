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

namespace {

// Tensor -> shard and the data bytes of a sharded checkpoint, as its index records them.
struct ShardIndex {
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

    // model.safetensors.index.json as transformers writes it.
    std::string text() const {
        std::string out = "{\n  \"metadata\": {\n    \"total_size\": " + std::to_string(total_size) + "\n  },\n  \"weight_map\": {";
        bool first = true;
        for (const auto& [tensor, shard] : weight_map) {
            out += first ? "\n    " : ",\n    ";
            first = false;
            detail::append_json_string(out, tensor);
            out += ": ";
            detail::append_json_string(out, shard);
        }
        out += first ? "}\n}\n" : "\n  }\n}\n";
        return out;
    }
};

}  // namespace

struct ShardedSafetensorsWriter::Impl : ShardIndex {
    std::filesystem::path directory;
    Metadata metadata;
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
    write_file_atomically(impl_->directory / safetensors_index_name, impl_->text());
}

std::uint64_t ShardedSafetensorsWriter::total_size() const noexcept { return impl_->total_size; }

struct ShardedSafetensorsPlan::Impl : ShardIndex {
    Metadata metadata;
    std::vector<PlannedFile> shard_files;
};

ShardedSafetensorsPlan::ShardedSafetensorsPlan(Metadata shard_metadata) : impl_(std::make_unique<Impl>()) {
    impl_->metadata = std::move(shard_metadata);
}
ShardedSafetensorsPlan::~ShardedSafetensorsPlan() = default;
ShardedSafetensorsPlan::ShardedSafetensorsPlan(ShardedSafetensorsPlan&&) noexcept = default;
ShardedSafetensorsPlan& ShardedSafetensorsPlan::operator=(ShardedSafetensorsPlan&&) noexcept = default;

void ShardedSafetensorsPlan::add_shard(const std::string& file_name, std::vector<TensorSpec> tensors,
                                       std::optional<Metadata> metadata) {
    auto [header, layout] = plan_safetensors_layout(std::move(tensors), metadata ? *metadata : impl_->metadata);
    impl_->record(file_name, layout);
    std::uint64_t bytes = 8 + header.size();
    for (const auto& t : layout) bytes += t.size_bytes();
    impl_->shard_files.push_back({file_name, bytes});
}

std::vector<PlannedFile> ShardedSafetensorsPlan::files() const {
    std::vector<PlannedFile> out = impl_->shard_files;
    out.push_back({safetensors_index_name, impl_->text().size()});
    return out;
}

}  // namespace moequant
