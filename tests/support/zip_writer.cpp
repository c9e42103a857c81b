#include "zip_writer.hpp"

namespace moequant::test {
namespace {

void append_le(std::vector<std::uint8_t>& out, std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

}  // namespace

std::uint32_t zip_crc32(const std::vector<std::uint8_t>& data) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::uint8_t b : data) {
        c ^= b;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

void put_le(std::vector<std::uint8_t>& bytes, std::uint64_t at, std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes.at(at + i) = static_cast<std::uint8_t>(value >> (8 * i));
}

void ZipWriter::add(const std::string& name, const std::vector<std::uint8_t>& data, std::uint16_t method,
                    std::uint16_t flags) {
    Entry e;
    e.where.name = name;
    e.where.local_header = out_.size();
    e.crc = zip_crc32(data);
    e.size = data.size();
    e.method = method;
    e.flags = flags | (options_.data_descriptors ? 0x0008 : 0);
    const bool descriptor = e.flags & 0x0008;
    const std::uint32_t size32 = options_.zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(e.size);

    append_le(out_, 0x04034b50, 4);
    append_le(out_, options_.zip64 ? 45 : 20, 2);
    append_le(out_, e.flags, 2);
    append_le(out_, method, 2);
    append_le(out_, 0, 4);  // time, date
    append_le(out_, descriptor ? 0 : e.crc, 4);
    append_le(out_, descriptor && !options_.zip64 ? 0 : size32, 4);
    append_le(out_, descriptor && !options_.zip64 ? 0 : size32, 4);
    append_le(out_, name.size(), 2);
    const std::uint64_t zip64_extra = options_.zip64 ? 4 + 16 : 0;
    // torch pads with an extra field "FB" so that the data starts on an alignment boundary.
    std::uint64_t start = out_.size() + 2 + name.size() + zip64_extra;
    std::uint64_t padding = 0;
    if (options_.alignment > 1) {
        padding = (options_.alignment - (start + 4) % options_.alignment) % options_.alignment;
        padding += 4;
    }
    append_le(out_, zip64_extra + padding, 2);
    out_.insert(out_.end(), name.begin(), name.end());
    if (options_.zip64) {
        append_le(out_, 0x0001, 2);
        append_le(out_, 16, 2);
        append_le(out_, descriptor ? 0 : e.size, 8);
        append_le(out_, descriptor ? 0 : e.size, 8);
    }
    if (padding) {
        append_le(out_, 'F' | ('B' << 8), 2);
        append_le(out_, padding - 4, 2);
        out_.insert(out_.end(), padding - 4, 'Z');
    }
    e.where.data = out_.size();
    out_.insert(out_.end(), data.begin(), data.end());
    if (descriptor) {
        append_le(out_, 0x08074b50, 4);
        append_le(out_, e.crc, 4);
        append_le(out_, e.size, options_.zip64 ? 8 : 4);
        append_le(out_, e.size, options_.zip64 ? 8 : 4);
    }
    entries_.push_back(e);
}

std::vector<std::uint8_t> ZipWriter::finish(const std::string& comment) {
    central_directory_ = out_.size();
    for (Entry& e : entries_) {
        e.where.central_header = out_.size();
        const std::uint32_t size32 = options_.zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(e.size);
        append_le(out_, 0x02014b50, 4);
        append_le(out_, options_.zip64 ? 45 : 20, 2);  // made by
        append_le(out_, options_.zip64 ? 45 : 20, 2);  // needed
        append_le(out_, e.flags, 2);
        append_le(out_, e.method, 2);
        append_le(out_, 0, 4);
        append_le(out_, e.crc, 4);
        append_le(out_, size32, 4);
        append_le(out_, size32, 4);
        append_le(out_, e.where.name.size(), 2);
        append_le(out_, options_.zip64 ? 4 + 24 : 0, 2);
        append_le(out_, 0, 2);  // comment
        append_le(out_, 0, 2);  // disk
        append_le(out_, 0, 2);  // internal attributes
        append_le(out_, 0, 4);  // external attributes
        append_le(out_, options_.zip64 ? 0xFFFFFFFFu : e.where.local_header, 4);
        out_.insert(out_.end(), e.where.name.begin(), e.where.name.end());
        if (options_.zip64) {
            append_le(out_, 0x0001, 2);
            append_le(out_, 24, 2);
            append_le(out_, e.size, 8);
            append_le(out_, e.size, 8);
            append_le(out_, e.where.local_header, 8);
        }
        written_.push_back(e.where);
    }
    const std::uint64_t directory_size = out_.size() - central_directory_;
    if (options_.zip64) {
        const std::uint64_t record = out_.size();
        append_le(out_, 0x06064b50, 4);
        append_le(out_, 44, 8);
        append_le(out_, 45, 2);
        append_le(out_, 45, 2);
        append_le(out_, 0, 4);
        append_le(out_, 0, 4);
        append_le(out_, entries_.size(), 8);
        append_le(out_, entries_.size(), 8);
        append_le(out_, directory_size, 8);
        append_le(out_, central_directory_, 8);
        append_le(out_, 0x07064b50, 4);
        append_le(out_, 0, 4);
        append_le(out_, record, 8);
        append_le(out_, 1, 4);
    }
    end_record_ = out_.size();
    append_le(out_, 0x06054b50, 4);
    append_le(out_, 0, 2);
    append_le(out_, 0, 2);
    append_le(out_, options_.zip64 ? 0xFFFF : entries_.size(), 2);
    append_le(out_, options_.zip64 ? 0xFFFF : entries_.size(), 2);
    append_le(out_, options_.zip64 ? 0xFFFFFFFFu : directory_size, 4);
    append_le(out_, options_.zip64 ? 0xFFFFFFFFu : central_directory_, 4);
    append_le(out_, comment.size(), 2);
    out_.insert(out_.end(), comment.begin(), comment.end());
    return out_;
}

}  // namespace moequant::test
