// Reading the zip container of a PyTorch checkpoint (private to the SDK): the central directory
// of a file image, checked so that every entry is a STORED (uncompressed) range that lies
// inside the image and overlaps no other. Nothing is decompressed or copied; an entry's bytes
// are a span of the image.
//
// Every count, size and offset in the file is hostile: arithmetic on them is checked, and an
// archive that is truncated, spanned over disks, encrypted, compressed, holds a name twice, or
// whose local headers disagree with the central directory is refused with Error(input) naming
// the file (docs/pytorch-bin.md, "The zip container").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moequant::detail {

struct ZipEntry {
    std::string name;
    std::uint64_t local_header_offset = 0;
    std::uint64_t data_offset = 0;  // first byte of the stored data, from the start of the image
    std::uint64_t size = 0;         // stored == uncompressed size
    std::uint32_t crc32 = 0;        // as the central directory records it
};

class ZipArchive {
public:
    // Parses and checks the archive held in `image` (which must outlive the archive). `file`
    // names the source in errors.
    static ZipArchive parse(std::span<const std::byte> image, const std::string& file);

    // Entries in central-directory order.
    const std::vector<ZipEntry>& entries() const noexcept { return entries_; }
    const ZipEntry* find(std::string_view name) const noexcept;
    std::span<const std::byte> bytes(const ZipEntry& entry) const noexcept;

    // Error(input, CrcMismatch) unless the entry's bytes have the recorded CRC-32. A recorded
    // CRC of 0 is not checked: torch can be told not to compute CRCs and then writes 0.
    void verify_crc32(const ZipEntry& entry) const;

private:
    std::span<const std::byte> image_;
    std::string file_;
    std::vector<ZipEntry> entries_;
    std::unordered_map<std::string, std::size_t> by_name_;
};

// CRC-32 (ISO-HDLC, as zip uses it) of `bytes`.
std::uint32_t zip_crc32(std::span<const std::byte> bytes) noexcept;

}  // namespace moequant::detail
