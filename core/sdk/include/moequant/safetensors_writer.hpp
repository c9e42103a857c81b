// Writing safetensors files as tensors are produced, with memory bounded by one tensor.
//
// The header sits in front of the data and holds every offset, so the writer is told all
// tensors (name, dtype, shape) up front; it then lays them out exactly as the reference writer
// does (model-families.md §3.4): data ordered by descending dtype (reference enum order), then
// by name; compact JSON with `__metadata__` first and fields in the order dtype, shape,
// data_offsets; the header padded with spaces to a multiple of 8. The same tensors therefore
// give the same bytes as Python's safetensors.save_file. Tensors may then be written in any
// order, each at once or in consecutive chunks, straight to disk (nothing is buffered). The
// file is written under a temporary name and renamed by finish() (see output_file.hpp).
#pragma once

#include <moequant/dtype.hpp>
#include <moequant/export.hpp>
#include <moequant/safetensors_reader.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moequant {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// The `__metadata__` transformers writes and expects: {"format": "pt"}.
MOEQUANT_API Metadata default_safetensors_metadata();

// Header bytes (JSON + padding, without the 8-byte length) and tensor entries in data order,
// exactly as the writer will produce them. Throws Error(input) on duplicate or empty names,
// the reserved name "__metadata__", or shapes that are not a whole number of bytes.
MOEQUANT_API std::pair<std::string, std::vector<TensorInfo>>
plan_safetensors_layout(std::vector<TensorSpec> tensors, const Metadata& metadata);

// The size of the file SafetensorsWriter writes for these tensors and metadata: the 8-byte
// length, the header and the data (same checks as plan_safetensors_layout).
MOEQUANT_API std::uint64_t safetensors_file_size(std::vector<TensorSpec> tensors, const Metadata& metadata);

class MOEQUANT_API SafetensorsWriter {
public:
    // Plans the layout, creates the partial file and writes the header. `metadata` entries are
    // written in the given order; pass {} to write no `__metadata__` at all.
    SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors,
                      Metadata metadata = default_safetensors_metadata());
    ~SafetensorsWriter();  // without finish(): the partial file is removed
    SafetensorsWriter(SafetensorsWriter&&) noexcept;
    SafetensorsWriter& operator=(SafetensorsWriter&&) noexcept;

    // Writes a whole tensor; the byte count must match its dtype and shape.
    void write(std::string_view name, std::span<const std::byte> bytes);
    void write(std::string_view name, const TensorView& view);
    // Writes the next `bytes.size()` bytes of a tensor (chunks must come in order).
    void write_chunk(std::string_view name, std::span<const std::byte> bytes);

    // Checks that every tensor was completely written, then flushes and renames into place.
    void finish();

    const std::filesystem::path& path() const noexcept;
    const std::vector<TensorInfo>& layout() const noexcept;  // in data order
    std::uint64_t file_size() const noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace moequant
