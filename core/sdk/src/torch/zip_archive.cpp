#include "torch/zip_archive.hpp"

#include <moequant/checked_math.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

namespace moequant::detail {
namespace {

// Record signatures and fixed sizes (PKWARE APPNOTE 6.3, sections 4.3.7 - 4.3.16).
constexpr std::uint32_t local_header_signature = 0x04034b50;
constexpr std::uint32_t central_header_signature = 0x02014b50;
constexpr std::uint32_t end_record_signature = 0x06054b50;
constexpr std::uint32_t zip64_end_record_signature = 0x06064b50;
constexpr std::uint32_t zip64_locator_signature = 0x07064b50;
constexpr std::uint32_t data_descriptor_signature = 0x08074b50;
constexpr std::uint64_t end_record_size = 22;
constexpr std::uint64_t zip64_locator_size = 20;
constexpr std::uint64_t zip64_end_record_min_size = 56;
constexpr std::uint64_t central_header_size = 46;
constexpr std::uint64_t local_header_size = 30;
constexpr std::uint64_t max_comment_size = 0xFFFF;
constexpr std::uint16_t zip64_extra_id = 0x0001;
constexpr std::uint32_t sentinel32 = 0xFFFFFFFF;
constexpr std::uint16_t sentinel16 = 0xFFFF;

// General-purpose flag bits.
constexpr std::uint16_t flag_encrypted = 0x0001;
constexpr std::uint16_t flag_data_descriptor = 0x0008;
constexpr std::uint16_t flag_strong_encryption = 0x0040;
constexpr std::uint16_t flag_masked_headers = 0x2000;

constexpr std::array<std::uint32_t, 256> crc_table = [] {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    return table;
}();

std::string quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

// Little-endian reads at offsets the caller has bounds-checked.
class Image {
public:
    Image(std::span<const std::byte> bytes, const std::string& file) : bytes_(bytes), file_(file) {}

    std::uint64_t size() const noexcept { return bytes_.size(); }
    const std::string& file() const noexcept { return file_; }

    [[noreturn]] void fail(const std::string& message, const std::string& code = "InvalidZip",
                           const std::string& hint = {}) const {
        throw Error(ErrorKind::input, message, {.file = file_, .code = code, .hint = hint});
    }

    // offset + length, refused unless the range lies within [0, limit).
    std::uint64_t range_end(std::uint64_t offset, std::uint64_t length, std::uint64_t limit, std::string_view what) const {
        const std::uint64_t end = checked_add(offset, length, what, {.file = file_, .code = "ZipOutOfBounds"});
        if (end > limit)
            fail(std::string(what) + " [" + std::to_string(offset) + ", " + std::to_string(end) +
                     ") runs past the end of its region (" + std::to_string(limit) + " bytes)",
                 "ZipOutOfBounds");
        return end;
    }

    std::uint16_t u16(std::uint64_t at) const noexcept { return static_cast<std::uint16_t>(read(at, 2)); }
    std::uint32_t u32(std::uint64_t at) const noexcept { return static_cast<std::uint32_t>(read(at, 4)); }
    std::uint64_t u64(std::uint64_t at) const noexcept { return read(at, 8); }
    std::string_view text(std::uint64_t at, std::uint64_t length) const noexcept {
        return {reinterpret_cast<const char*>(bytes_.data()) + at, static_cast<std::size_t>(length)};
    }

private:
    std::uint64_t read(std::uint64_t at, int bytes) const noexcept {
        std::uint64_t v = 0;
        for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(bytes_[static_cast<std::size_t>(at) + i]);
        return v;
    }

    std::span<const std::byte> bytes_;
    const std::string& file_;
};

// Where the central directory is, from the end records.
struct Directory {
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
    std::uint64_t entries = 0;
    std::uint64_t end = 0;  // where the end records begin: the directory must end before
};

// The end-of-central-directory record: searched backwards over the largest comment, and taken
// only where its comment ends exactly at the end of the file.
std::uint64_t find_end_record(const Image& image) {
    const std::uint64_t size = image.size();
    std::optional<std::uint64_t> found;
    if (size >= end_record_size) {
        const std::uint64_t last = size - end_record_size;
        const std::uint64_t first = last > max_comment_size ? last - max_comment_size : 0;
        for (std::uint64_t at = last + 1; at-- > first;)
            if (image.u32(at) == end_record_signature && image.u16(at + 20) == last - at) {
                found = at;
                break;
            }
    }
    if (!found) {
        const bool legacy = size > 0 && image.text(0, 1)[0] == '\x80';
        image.fail("no zip end-of-central-directory record: the file is truncated or is not a zip archive (" +
                       std::to_string(size) + " bytes)",
                   "NotAZipArchive",
                   legacy ? "it starts like a bare pickle: the format torch wrote before 1.6, which moequant does not "
                            "read; re-save it with a newer torch or convert it to safetensors"
                          : "");
    }
    return *found;
}

// A 16- or 32-bit field of the classic end record must agree with its zip64 value unless it
// holds the "see zip64" sentinel.
void check_agrees(const Image& image, std::uint64_t classic, std::uint64_t sentinel, std::uint64_t zip64, std::string_view what) {
    if (classic != sentinel && classic != zip64)
        image.fail("the end record says " + std::string(what) + " is " + std::to_string(classic) +
                   ", its zip64 record says " + std::to_string(zip64));
}

Directory read_end_records(const Image& image) {
    const std::uint64_t at = find_end_record(image);
    Directory d;
    const std::uint16_t disk = image.u16(at + 4), directory_disk = image.u16(at + 6);
    const std::uint16_t entries_here = image.u16(at + 8), entries = image.u16(at + 10);
    const std::uint32_t size = image.u32(at + 12), offset = image.u32(at + 16);
    d.entries = entries;
    d.size = size;
    d.offset = offset;
    d.end = at;
    std::uint64_t disks = disk | directory_disk, entries_on_disk = entries_here;

    if (at >= zip64_locator_size && image.u32(at - zip64_locator_size) == zip64_locator_signature) {
        const std::uint64_t locator = at - zip64_locator_size;
        const std::uint64_t record = image.u64(locator + 8);
        disks |= image.u32(locator + 4) | (image.u32(locator + 16) > 1 ? 1u : 0u);
        image.range_end(record, zip64_end_record_min_size, locator, "the zip64 end record");
        if (image.u32(record) != zip64_end_record_signature)
            image.fail("the zip64 locator points at offset " + std::to_string(record) + ", which holds no zip64 end record");
        const std::uint64_t length = checked_add(image.u64(record + 4), std::uint64_t{12}, "the zip64 end record's size",
                                                 {.file = image.file(), .code = "ZipOutOfBounds"});
        if (length < zip64_end_record_min_size) image.fail("the zip64 end record is too short");
        image.range_end(record, length, locator, "the zip64 end record");
        disks |= image.u32(record + 16) | image.u32(record + 20);
        entries_on_disk = image.u64(record + 24);
        const std::uint64_t entries64 = image.u64(record + 32), size64 = image.u64(record + 40), offset64 = image.u64(record + 48);
        check_agrees(image, entries, sentinel16, entries64, "the entry count");
        check_agrees(image, entries_here, sentinel16, entries_on_disk, "the entry count of this disk");
        check_agrees(image, size, sentinel32, size64, "the central directory's size");
        check_agrees(image, offset, sentinel32, offset64, "the central directory's offset");
        d.entries = entries64;
        d.size = size64;
        d.offset = offset64;
        d.end = record;
    }
    if (disks != 0 || entries_on_disk != d.entries)
        image.fail("the archive is split over several disks (spanned zip), which a checkpoint never is");
    image.range_end(d.offset, d.size, d.end, "the central directory");
    if (d.entries > d.size / central_header_size)
        image.fail("the end record claims " + std::to_string(d.entries) + " entries, more than fit in the " +
                   std::to_string(d.size) + "-byte central directory");
    return d;
}

// The values of a zip64 extended-information extra field (id 1), which replace the fields
// holding the sentinel, in this order.
struct Zip64Values {
    std::optional<std::uint64_t> size, compressed_size, offset;
    std::optional<std::uint32_t> disk;
};

// Finds the zip64 field in an extra block; the other fields (torch's "FB" padding) are skipped.
// `need_*` say which values the header replaced with the sentinel; a field that lacks one of
// them is refused when `strict` (central headers), and what it lacks stays unset otherwise.
Zip64Values read_zip64_extra(const Image& image, std::uint64_t at, std::uint64_t length, bool need_size,
                             bool need_compressed, bool need_offset, bool need_disk, const std::string& entry, bool strict) {
    Zip64Values v;
    bool seen = false;
    const std::uint64_t end = at + length;
    while (at < end) {
        if (end - at < 4) image.fail("entry " + quoted(entry) + " has a truncated extra field");
        const std::uint16_t id = image.u16(at), field_size = image.u16(at + 2);
        const std::uint64_t data = at + 4;
        if (field_size > end - data) image.fail("entry " + quoted(entry) + " has an extra field that runs past its header");
        if (id == zip64_extra_id) {
            if (seen) image.fail("entry " + quoted(entry) + " has two zip64 extra fields");
            seen = true;
            std::uint64_t p = data;
            const std::uint64_t field_end = data + field_size;
            auto take64 = [&](bool need, std::optional<std::uint64_t>& out) {
                if (!need) return;
                if (field_end - p >= 8) {
                    out = image.u64(p);
                    p += 8;
                } else if (strict) {
                    image.fail("entry " + quoted(entry) + "'s zip64 extra field lacks a value its header defers to it");
                }
            };
            take64(need_size, v.size);
            take64(need_compressed, v.compressed_size);
            take64(need_offset, v.offset);
            if (need_disk) {
                if (field_end - p >= 4) v.disk = image.u32(p);
                else if (strict) image.fail("entry " + quoted(entry) + "'s zip64 extra field lacks its disk number");
            }
        }
        at = data + field_size;
    }
    if (strict && !seen && (need_size || need_compressed || need_offset || need_disk))
        image.fail("entry " + quoted(entry) + " defers its sizes or offset to a zip64 extra field it does not have");
    return v;
}

void refuse_encryption(const Image& image, std::uint16_t flags, const std::string& name) {
    if (flags & (flag_encrypted | flag_strong_encryption | flag_masked_headers))
        image.fail("entry " + quoted(name) + " is encrypted", "EncryptedEntry");
}

void refuse_compression(const Image& image, std::uint16_t method, const std::string& name) {
    if (method != 0)
        image.fail("entry " + quoted(name) + " is compressed (method " + std::to_string(method) +
                       (method == 8 ? ", deflate" : "") + "); only stored (uncompressed) entries are read",
                   "CompressedEntry", "torch.save writes every entry stored; this archive was rewritten by another tool");
}

struct CentralRecord {
    ZipEntry entry;
    std::uint16_t method = 0;
};

std::vector<CentralRecord> read_central_directory(const Image& image, const Directory& d) {
    std::vector<CentralRecord> records;
    records.reserve(static_cast<std::size_t>(d.entries));
    const std::uint64_t end = d.offset + d.size;
    std::uint64_t at = d.offset;
    for (std::uint64_t i = 0; i < d.entries; ++i) {
        image.range_end(at, central_header_size, end, "central directory entry " + std::to_string(i));
        if (image.u32(at) != central_header_signature)
            image.fail("central directory entry " + std::to_string(i) + " at offset " + std::to_string(at) +
                       " has no central header signature");
        const std::uint16_t flags = image.u16(at + 8), method = image.u16(at + 10);
        const std::uint32_t crc = image.u32(at + 16), compressed = image.u32(at + 20), size = image.u32(at + 24);
        const std::uint16_t name_length = image.u16(at + 28), extra_length = image.u16(at + 30),
                            comment_length = image.u16(at + 32), disk = image.u16(at + 34);
        const std::uint32_t local = image.u32(at + 42);
        const std::uint64_t name_at = at + central_header_size;
        const std::uint64_t next = image.range_end(name_at, std::uint64_t{name_length} + extra_length + comment_length, end,
                                                   "central directory entry " + std::to_string(i));
        CentralRecord r;
        r.entry.name = std::string(image.text(name_at, name_length));
        const std::string& name = r.entry.name;
        if (name.empty()) image.fail("central directory entry " + std::to_string(i) + " has an empty name");
        refuse_encryption(image, flags, name);
        refuse_compression(image, method, name);
        const Zip64Values z = read_zip64_extra(image, name_at + name_length, extra_length, size == sentinel32,
                                               compressed == sentinel32, local == sentinel32, disk == sentinel16, name, true);
        r.method = method;
        r.entry.crc32 = crc;
        r.entry.size = z.size.value_or(size);
        r.entry.local_header_offset = z.offset.value_or(local);
        if (z.compressed_size.value_or(compressed) != r.entry.size)
            image.fail("stored entry " + quoted(name) + " has a compressed size (" +
                           std::to_string(z.compressed_size.value_or(compressed)) + ") unlike its size (" +
                           std::to_string(r.entry.size) + ")",
                       "ZipSizeMismatch");
        if (z.disk.value_or(disk) != 0) image.fail("entry " + quoted(name) + " starts on another disk (spanned zip)");
        records.push_back(std::move(r));
        at = next;
    }
    if (at != end)
        image.fail("the central directory holds " + std::to_string(end - at) + " bytes after its " +
                   std::to_string(d.entries) + " entries");
    return records;
}

// Reads an entry's local header, sets its data offset and returns where its bytes (and data
// descriptor, if any) end. Everything of an entry must lie before the central directory.
std::uint64_t read_local_header(const Image& image, CentralRecord& r, std::uint64_t limit) {
    ZipEntry& e = r.entry;
    const std::uint64_t at = e.local_header_offset;
    image.range_end(at, local_header_size, limit, "the local header of entry " + quoted(e.name));
    if (image.u32(at) != local_header_signature)
        image.fail("entry " + quoted(e.name) + ": offset " + std::to_string(at) + " holds no local header");
    const std::uint16_t flags = image.u16(at + 6), method = image.u16(at + 8);
    const std::uint32_t crc = image.u32(at + 14), compressed = image.u32(at + 18), size = image.u32(at + 22);
    const std::uint16_t name_length = image.u16(at + 26), extra_length = image.u16(at + 28);
    refuse_encryption(image, flags, e.name);
    refuse_compression(image, method, e.name);
    const std::uint64_t name_at = at + local_header_size;
    e.data_offset = image.range_end(name_at, std::uint64_t{name_length} + extra_length, limit,
                                    "the local header of entry " + quoted(e.name));
    if (image.text(name_at, name_length) != e.name)
        image.fail("entry " + quoted(e.name) + ": its local header names it " +
                   quoted(image.text(name_at, std::min<std::uint64_t>(name_length, 256))));
    const std::uint64_t data_end = image.range_end(e.data_offset, e.size, limit, "the data of entry " + quoted(e.name));

    if (!(flags & flag_data_descriptor)) {
        const Zip64Values z = read_zip64_extra(image, name_at + name_length, extra_length, size == sentinel32,
                                               compressed == sentinel32, false, false, e.name, true);
        if (crc != e.crc32 || z.size.value_or(size) != e.size || z.compressed_size.value_or(compressed) != e.size)
            image.fail("entry " + quoted(e.name) + ": its local header's CRC or sizes disagree with the central directory",
                       "ZipSizeMismatch");
        return data_end;
    }
    // Sizes and CRC follow the data (torch 1.x writes every entry so, with zeros in the local
    // header); the central directory's values must match them.
    if ((crc != 0 && crc != e.crc32) || (size != 0 && size != sentinel32 && size != e.size) ||
        (compressed != 0 && compressed != sentinel32 && compressed != e.size))
        image.fail("entry " + quoted(e.name) + ": its local header's CRC or sizes disagree with the central directory",
                   "ZipSizeMismatch");
    std::uint64_t p = data_end;
    if (limit - p >= 4 && image.u32(p) == data_descriptor_signature) p += 4;
    if (limit - p >= 12 && image.u32(p) == e.crc32 && image.u32(p + 4) == e.size && image.u32(p + 8) == e.size)
        return p + 12;
    if (limit - p >= 20 && image.u32(p) == e.crc32 && image.u64(p + 4) == e.size && image.u64(p + 12) == e.size)
        return p + 20;
    image.fail("entry " + quoted(e.name) + ": the data descriptor after its bytes is missing or disagrees with the central directory",
               "ZipSizeMismatch");
}

}  // namespace

std::uint32_t zip_crc32(std::span<const std::byte> bytes) noexcept {
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::byte b : bytes) c = crc_table[(c ^ static_cast<std::uint8_t>(b)) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

ZipArchive ZipArchive::parse(std::span<const std::byte> bytes, const std::string& file) {
    const Image image(bytes, file);
    const Directory directory = read_end_records(image);
    std::vector<CentralRecord> records = read_central_directory(image, directory);

    ZipArchive archive;
    archive.image_ = bytes;
    archive.file_ = file;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> extents;  // [local header, end of data)
    extents.reserve(records.size());
    for (CentralRecord& r : records) {
        const std::uint64_t end = read_local_header(image, r, directory.offset);
        extents.emplace_back(r.entry.local_header_offset, end);
        if (!archive.by_name_.emplace(r.entry.name, archive.entries_.size()).second)
            image.fail("the archive holds two entries named " + quoted(r.entry.name), "DuplicateEntry");
        archive.entries_.push_back(std::move(r.entry));
    }
    std::sort(extents.begin(), extents.end());
    for (std::size_t i = 1; i < extents.size(); ++i)
        if (extents[i].first < extents[i - 1].second)
            image.fail("two entries overlap (the one at offset " + std::to_string(extents[i].first) +
                           " starts inside the one at offset " + std::to_string(extents[i - 1].first) + ")",
                       "OverlappingEntries");
    return archive;
}

const ZipEntry* ZipArchive::find(std::string_view name) const noexcept {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : &entries_[it->second];
}

std::span<const std::byte> ZipArchive::bytes(const ZipEntry& entry) const noexcept {
    return image_.subspan(static_cast<std::size_t>(entry.data_offset), static_cast<std::size_t>(entry.size));
}

void ZipArchive::verify_crc32(const ZipEntry& entry) const {
    if (entry.crc32 == 0) return;
    const std::uint32_t actual = zip_crc32(bytes(entry));
    if (actual != entry.crc32)
        throw Error(ErrorKind::input,
                    "entry '" + entry.name + "' is damaged: its CRC-32 is " + std::to_string(actual) +
                        ", the archive records " + std::to_string(entry.crc32),
                    {.file = file_, .code = "CrcMismatch"});
}

}  // namespace moequant::detail
