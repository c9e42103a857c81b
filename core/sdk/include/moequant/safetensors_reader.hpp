// Reading safetensors files: header validation exactly as the reference reader, zero-copy views.
//
// open() reads and validates only the header (model-families.md §3.3, in the reference order:
// HeaderTooSmall, HeaderTooLarge, InvalidHeaderLength, InvalidHeader (UTF-8),
// InvalidHeaderDeserialization (JSON), then per tensor InvalidOffset, ValidationOverflow,
// MisalignedSlice, TensorInvalidInfo, and finally MetadataIncompleteBuffer). It is stricter
// than the reference where the reference is silently lenient: duplicate names, unknown fields
// in a tensor entry and non-integer numbers are rejected. Every failure is an Error(input)
// whose code() is the reason (the reference's error name where it has one) and whose message
// names the file and, where known, the tensor.
//
// The file is memory-mapped on the first data access, so inspecting many shards costs only
// their header bytes. Views stay valid as long as the SafetensorsFile lives.
//
// A PyTorch zip checkpoint (torch.save since 1.6: pytorch_model.bin and its shards) is read
// through the same class (open_pytorch): its pickle is interpreted by a restricted unpickler
// that runs nothing and refuses every global but torch's tensor reconstructions, and its
// contiguous tensors are described as if the whole file were a safetensors data buffer
// (docs/pytorch-bin.md).
#pragma once

#include <moequant/dtype.hpp>
#include <moequant/export.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moequant {

// Largest header the reference accepts (MAX_HEADER_SIZE).
inline constexpr std::uint64_t safetensors_max_header_size = 100'000'000;

// One entry of a safetensors header.
struct TensorInfo {
    std::string name;
    DType dtype = DType::U8;
    Shape shape;
    std::uint64_t begin = 0;  // data_offsets, relative to the start of the data buffer
    std::uint64_t end = 0;

    std::uint64_t size_bytes() const noexcept { return end - begin; }
    std::uint64_t elements() const noexcept { return shape_elements(shape).value_or(0); }
};

// The validated content of a header.
struct SafetensorsHeader {
    std::vector<TensorInfo> tensors;  // sorted by data offset
    bool has_metadata = false;        // a __metadata__ object was present (possibly empty)
    std::vector<std::pair<std::string, std::string>> metadata;  // in file order
    std::uint64_t data_size = 0;      // sum of the tensors' byte spans
};

// Parses and validates header JSON for a data buffer of `data_size` bytes (the file length
// minus 8 minus the header length). `file` names the source in messages.
MOEQUANT_API SafetensorsHeader parse_safetensors_header(std::string_view header_json,
                                                        std::uint64_t data_size,
                                                        const std::string& file);

class MOEQUANT_API SafetensorsFile {
public:
    // Opens and validates a file. Throws Error(input) for invalid content, Error(io) when the
    // file cannot be read.
    static SafetensorsFile open(const std::filesystem::path& path);

    // Validates a complete file image held in memory (tests, fuzzing); `bytes` must outlive
    // the returned object.
    static SafetensorsFile from_bytes(std::span<const std::byte> bytes, const std::string& name);

    // Opens a PyTorch zip checkpoint read with the restricted unpickler. Its header describes
    // the state dict's tensors with data offsets relative to the start of the file (the data
    // buffer is the whole file): header_length() and data_start() are 0, there is no metadata,
    // tensors sharing a storage (tied weights) may overlap, and header_digest() is the digest
    // of the archive's data.pkl. Error(input) for what it refuses (hostile or unsupported
    // content, non-contiguous or big-endian tensors), Error(io) when the file cannot be read.
    // The file is mapped at once (the zip directory is at its end).
    static SafetensorsFile open_pytorch(const std::filesystem::path& path);

    // The same for a file image held in memory; `bytes` must outlive the returned object.
    static SafetensorsFile pytorch_from_bytes(std::span<const std::byte> bytes, const std::string& name);

    // A file of another container whose tensors a CheckpointReader described (checkpoint_reader.hpp):
    // offsets from the start of the file (header_length() and data_start() are 0, no metadata),
    // ranges may overlap, header_digest() is `digest`. Error(input) naming file and tensor for a
    // range past the end of the file, a size that does not hold the shape in the dtype, or a
    // duplicate name. The file is mapped on the first data access, as open() does.
    static SafetensorsFile open_described(const std::filesystem::path& path, std::vector<TensorInfo> tensors,
                                          std::string digest);

    SafetensorsFile(SafetensorsFile&&) noexcept;
    SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
    ~SafetensorsFile();

    const std::filesystem::path& path() const noexcept;
    const SafetensorsHeader& header() const noexcept;
    const std::vector<TensorInfo>& tensors() const noexcept { return header().tensors; }

    // The entry of a tensor, or nullptr.
    const TensorInfo* find(std::string_view name) const noexcept;
    bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }
    // The entry of a tensor; throws Error(input) naming file and tensor if absent.
    const TensorInfo& info(std::string_view name) const;

    // Zero-copy view of a tensor's bytes (maps the file on first use; thread-safe).
    TensorView view(std::string_view name) const;
    TensorView view(const TensorInfo& info) const;

    // Drops the pages of a tensor's bytes from this process's memory (the page cache keeps
    // them): after a layer is converted its input no longer counts towards resident memory.
    // Views of the tensor stay valid (pages are read again on access).
    void release_pages(const TensorInfo& info) const noexcept;

    // __metadata__ value for `key`, if present.
    std::optional<std::string> metadata(std::string_view key) const;

    std::uint64_t header_length() const noexcept;  // N, the header's byte length (0 for PyTorch files)
    std::string header_digest() const;             // Digest64 of the header bytes (hex); of data.pkl for PyTorch files
    // Where the data buffer starts: 8 + N, or 0 for a PyTorch file.
    std::uint64_t data_start() const noexcept;
    std::uint64_t file_size() const noexcept;

private:
    struct Impl;
    explicit SafetensorsFile(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace moequant
