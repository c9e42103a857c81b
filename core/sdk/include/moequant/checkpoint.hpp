// A model checkpoint on disk: a folder with `model.safetensors.index.json` (sharded) or a
// single `model.safetensors`.
//
// Shard names come from the index's weight_map only — never from a file-name pattern and
// never from globbing the folder (repositories can hold other shard sets, e.g. GPT-OSS's
// original/ or Mistral's consolidated*.safetensors). Each tensor is looked up on its own, so a
// weight and its scale may sit in different shards. Shards are opened (header only) on first
// use; opening is thread-safe. Problems are Error(input) naming the index or shard file and
// the tensor: a shard named by the index that does not exist, a shard name that leaves the
// folder, a tensor the index places in a shard that does not hold it.
//
// A model in another runtime's files (GGUF) is a checkpoint too, described by a CheckpointReader
// plugin (checkpoint_reader.hpp): its files are the shards, its tensors carry the Hugging Face
// names, and its side files (config.json, tokenizer.json) are the reader's, served by side_file().
#pragma once

#include <moequant/checkpoint_reader.hpp>
#include <moequant/export.hpp>
#include <moequant/model_config.hpp>
#include <moequant/safetensors_reader.hpp>
#include <moequant/source_encoding.hpp>
#include <moequant/tensor.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moequant {

class MOEQUANT_API Checkpoint {
public:
    // `path` is a model folder, an index file, or a single .safetensors file.
    static Checkpoint open(const std::filesystem::path& path);
    // The checkpoint a CheckpointReader described (each file opened with SafetensorsFile::open_described).
    static Checkpoint from_description(CheckpointDescription description);

    Checkpoint(Checkpoint&&) noexcept;
    Checkpoint& operator=(Checkpoint&&) noexcept;
    ~Checkpoint();

    // The model folder (where config.json and the shards live).
    const std::filesystem::path& directory() const noexcept;
    // The index file, if the checkpoint has one.
    const std::optional<std::filesystem::path>& index_path() const noexcept;

    // Shard file names (relative to directory()), in order of first appearance in the index.
    const std::vector<std::string>& shard_names() const noexcept;
    // Every tensor name, sorted (built on first call).
    const std::vector<std::string>& tensor_names() const;
    std::size_t tensor_count() const noexcept;
    bool contains(std::string_view tensor) const noexcept;
    // The shard file name holding a tensor; Error(input) if the checkpoint has no such tensor.
    const std::string& shard_of(std::string_view tensor) const;

    // A shard, opened and validated on first use.
    const SafetensorsFile& shard(const std::string& shard_name) const;
    // A tensor's header entry (opens its shard); Error(input) if absent.
    const TensorInfo& info(std::string_view tensor) const;
    // Zero-copy view of a tensor's bytes (maps its shard).
    TensorView view(std::string_view tensor) const;

    // Drops a tensor's mapped pages from resident memory (see SafetensorsFile::release_pages).
    void release_pages(std::string_view tensor) const;

    // Opens every shard and checks that the index and the shards agree both ways (every name
    // in the index is in its shard, every tensor of a shard is in the index).
    void validate_all() const;

    // config.json of the model folder.
    bool has_config() const;
    ModelConfig config() const;

    // What holds the model: "safetensors", "pytorch", or the id of the reader that described it.
    const std::string& container() const noexcept;
    // A side file's content by name ("config.json", "tokenizer.json", ...): the model folder's
    // file, or the one a reader rebuilt; nullopt when there is none. Error(input) for a file that
    // is not a regular file or exceeds the JSON size limit.
    std::optional<std::string> side_file(std::string_view name) const;

    // ---- weights through their encodings (source_encoding.hpp) ----
    // The encodings weight() consults, in preference order (ties between equal scores are
    // errors, never resolved by order). The host sets them once, before the first weight().
    void use_encodings(std::vector<const SourceEncoding*> encodings);
    const std::vector<const SourceEncoding*>& encodings() const noexcept;
    // Weight `name` as the best-fitting encoding recognised it (cached, thread-safe). Error(input)
    // "UnsupportedEncoding" when no encoding recognises it (the message lists the tensors and
    // dtypes found and the encodings installed), "AmbiguousEncoding" on a tie.
    const EncodedWeight& weight(std::string_view name) const;
    // As weight(), but null when no tensor is named `name` and none claims to belong to it.
    const EncodedWeight* find_weight(std::string_view name) const;
    // The weight a stored tensor is part of (a scale, packed words, an ignored input_scale) or is
    // by itself; null when no encoding recognises it.
    const EncodedWeight* weight_holding(std::string_view tensor) const;

private:
    struct Impl;
    explicit Checkpoint(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace moequant
