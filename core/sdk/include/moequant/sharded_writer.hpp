// Writing a sharded safetensors checkpoint: shards with names fixed up front, then the index.
//
// Each shard is a SafetensorsWriter (temporary name, renamed when complete). The index
// `model.safetensors.index.json` ({"metadata": {"total_size": N}, "weight_map": {...}}, keys
// sorted, as transformers writes it) is written last, so its presence means every shard it
// names is complete. Shards finished by an earlier, interrupted run can be adopted instead of
// rewritten (resume).
#pragma once

#include <moequant/export.hpp>
#include <moequant/output_file.hpp>
#include <moequant/safetensors_writer.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moequant {

inline constexpr const char* safetensors_index_name = "model.safetensors.index.json";

// "model-00001-of-00004.safetensors" (1-based, zero-padded to 5 digits like transformers).
MOEQUANT_API std::string shard_file_name(std::size_t index, std::size_t count);

class MOEQUANT_API ShardedSafetensorsWriter {
public:
    // Shards go into `directory`, which must exist.
    explicit ShardedSafetensorsWriter(std::filesystem::path directory,
                                      Metadata shard_metadata = default_safetensors_metadata());
    ~ShardedSafetensorsWriter();

    // Starts a shard; the caller writes its tensors and calls finish() on it. Tensor names must
    // be unique across all shards. `metadata` replaces the writer's shard metadata for this one.
    SafetensorsWriter open_shard(const std::string& file_name, std::vector<TensorSpec> tensors,
                                 std::optional<Metadata> metadata = std::nullopt);

    // Records a shard that is already complete on disk (validated by reading its header).
    void adopt_shard(const std::string& file_name);

    // Writes the index. Every shard must exist under its final name by now.
    void write_index();

    std::uint64_t total_size() const noexcept;  // tensor data bytes over all shards

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// What a ShardedSafetensorsWriter given the same shards writes, sized without writing anything
// (--dry-run): add_shard() takes what open_shard() would.
class MOEQUANT_API ShardedSafetensorsPlan {
public:
    explicit ShardedSafetensorsPlan(Metadata shard_metadata = default_safetensors_metadata());
    ~ShardedSafetensorsPlan();
    ShardedSafetensorsPlan(ShardedSafetensorsPlan&&) noexcept;
    ShardedSafetensorsPlan& operator=(ShardedSafetensorsPlan&&) noexcept;

    void add_shard(const std::string& file_name, std::vector<TensorSpec> tensors, std::optional<Metadata> metadata = std::nullopt);
    // The shards added so far, then the index they make.
    std::vector<PlannedFile> files() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace moequant
