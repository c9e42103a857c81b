// CheckpointReader: a model stored in another runtime's files (llama.cpp's GGUF), read as a
// checkpoint.
//
// A reader plugin recognises its files (by name and magic bytes, never by running anything) and
// describes them: every tensor the model's Hugging Face checkpoint has, under that name, as a
// byte range of one of its files — or, where the stored bytes are not a safetensors dtype (a
// ggml block type, rows in another order, a matrix stored split), as the parts an encoding of the
// same plugin recognises (source_encoding.hpp) — and the side files its metadata stands for
// (config.json, tokenizer.json, ...). Checkpoint::from_description() then serves adapters,
// encodings and formats exactly as a safetensors folder does: nothing downstream learns the
// container. Every count, size and offset read from the files is hostile: the reader checks
// them, and from_description() checks every range against its file again.
#pragma once

#include <moequant/export.hpp>
#include <moequant/safetensors_reader.hpp>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moequant {

struct CheckpointDescription {
    std::string container;              // the reader's id ("gguf"), printed by inspect
    std::filesystem::path directory;    // the folder holding the files (messages name files in it)
    struct File {
        std::string name;               // relative to directory
        std::vector<TensorInfo> tensors;  // offsets from the start of the file; ranges may overlap
        std::string digest;             // a digest of what the description read of the file (its header)
    };
    std::vector<File> files;
    // (name, content): config.json, tokenizer.json, tokenizer_config.json, generation_config.json.
    std::vector<std::pair<std::string, std::string>> side_files;
};

class MOEQUANT_API CheckpointReader {
public:
    virtual ~CheckpointReader();

    // Reader id, e.g. "gguf" ([a-z0-9_-]+).
    virtual std::string_view id() const = 0;
    virtual std::string_view description() const = 0;
    // Whether `path` (a file or a folder) holds this reader's model; cheap, reads at most a few bytes.
    virtual bool recognises(const std::filesystem::path& path) const = 0;
    // The model at `path`. Error(input) naming the file (and tensor or key) for what it cannot
    // read as a checkpoint; Error(io) when a file cannot be read.
    virtual CheckpointDescription describe(const std::filesystem::path& path) const = 0;
};

}  // namespace moequant
