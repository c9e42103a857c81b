#include "torch_tensor_file.hpp"

#include <moequant/error.hpp>

#include <boost/crc.hpp>

#include <cstdint>
#include <cstring>

namespace moequant::cli {
namespace {

void put_le(std::string& out, std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// The pickle opcodes torch.save's pickler emits for a dict of one tensor (protocol 2).
class Pickle {
public:
    Pickle() { op("\x80\x02"); }
    void op(std::string_view bytes) { out_.append(bytes); }
    void text(std::string_view s) {  // BINUNICODE
        out_.push_back('X');
        put_le(out_, s.size(), 4);
        out_.append(s);
    }
    void global(std::string_view module, std::string_view name) {  // GLOBAL
        out_.push_back('c');
        out_.append(module).push_back('\n');
        out_.append(name).push_back('\n');
    }
    void integer(std::int64_t v) {
        if (v >= 0 && v < 256) {  // BININT1
            out_.push_back('K');
            put_le(out_, static_cast<std::uint64_t>(v), 1);
        } else if (v >= INT32_MIN && v <= INT32_MAX) {  // BININT
            out_.push_back('J');
            put_le(out_, static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
        } else {  // LONG1: 8 bytes, two's complement
            out_.append("\x8a\x08");
            put_le(out_, static_cast<std::uint64_t>(v), 8);
        }
    }
    void integers(const std::vector<std::int64_t>& values) {  // a tuple of ints
        op("(");
        for (std::int64_t v : values) integer(v);
        op("t");
    }
    std::string finish() {
        op(".");
        return std::move(out_);
    }

private:
    std::string out_;
};

struct ZipEntry {
    std::string name;
    std::string data;
    std::uint32_t crc = 0;
    std::uint64_t offset = 0;
};

// Little-endian fields of the given widths, in order.
void put_fields(std::string& out, std::initializer_list<std::pair<std::uint64_t, int>> fields) {
    for (const auto& [value, bytes] : fields) put_le(out, value, bytes);
}

// A zip archive of stored (uncompressed) entries, as PyTorch's reader takes it: no data
// descriptors, no zip64 (an entry of 4 GiB or more is an internal error; this file is small).
std::string zip_stored(std::vector<ZipEntry> entries) {
    constexpr std::uint64_t version = 20;  // 2.0: stored entries
    std::string out;
    for (ZipEntry& e : entries) {
        if (e.data.size() >= 0xffffffffu) throw Error(ErrorKind::internal, "a zip entry of 4 GiB or more needs zip64");
        boost::crc_32_type crc;
        crc.process_bytes(e.data.data(), e.data.size());
        e.crc = crc.checksum();
        e.offset = out.size();
        // Local header: signature, version, flags, method, time and date, CRC, sizes, name and extra lengths.
        put_fields(out, {{0x04034b50, 4}, {version, 2}, {0, 2}, {0, 2}, {0, 4}, {e.crc, 4}, {e.data.size(), 4}, {e.data.size(), 4},
                         {e.name.size(), 2}, {0, 2}});
        out += e.name;
        out += e.data;
    }
    const std::uint64_t directory = out.size();
    for (const ZipEntry& e : entries) {
        // Central header: as the local one after "made by", then comment length, disk, attributes, offset.
        put_fields(out, {{0x02014b50, 4}, {version, 2}, {version, 2}, {0, 2}, {0, 2}, {0, 4}, {e.crc, 4}, {e.data.size(), 4},
                         {e.data.size(), 4}, {e.name.size(), 2}, {0, 2}, {0, 2}, {0, 2}, {0, 2}, {0, 4}, {e.offset, 4}});
        out += e.name;
    }
    // End of central directory: this disk, the directory's disk, entries (twice), its size and offset, no comment.
    put_fields(out, {{0x06054b50, 4}, {0, 2}, {0, 2}, {entries.size(), 2}, {entries.size(), 2}, {out.size() - directory, 4},
                     {directory, 4}, {0, 2}});
    return out;
}

}  // namespace

std::string torch_tensor_dict_bytes(const std::string& key, const Shape& shape, const std::vector<float>& values) {
    std::int64_t numel = 1;
    for (std::int64_t d : shape) numel *= d;
    if (numel != static_cast<std::int64_t>(values.size()))
        throw Error(ErrorKind::internal, "a tensor of shape " + shape_to_string(shape) + " given " + std::to_string(values.size()) + " values");
    std::vector<std::int64_t> stride(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;) stride[i - 1] = stride[i] * shape[i];

    Pickle p;
    p.op("}");  // the dict
    p.text(key);
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.op("(");  // its arguments
    p.op("(");  // the persistent id of the storage: ('storage', FloatStorage, key, location, numel)
    p.text("storage");
    p.global("torch", "FloatStorage");
    p.text("0");
    p.text("cpu");
    p.integer(numel);
    p.op("t");
    p.op("Q");     // BINPERSID
    p.integer(0);  // storage offset
    p.integers(std::vector<std::int64_t>(shape.begin(), shape.end()));
    p.integers(stride);
    p.op("\x89");  // requires_grad False
    p.global("collections", "OrderedDict");
    p.op(")");  // OrderedDict() as the backward hooks
    p.op("R");
    p.op("t");
    p.op("R");  // the tensor
    p.op("s");  // dict[key] = tensor

    std::string data(values.size() * 4, '\0');
    for (std::size_t i = 0; i < values.size(); ++i) {
        std::uint32_t bits;
        std::memcpy(&bits, &values[i], 4);
        for (int b = 0; b < 4; ++b) data[4 * i + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
    }
    return zip_stored({{"archive/data.pkl", p.finish()},
                       {"archive/byteorder", "little"},
                       {"archive/data/0", std::move(data)},
                       {"archive/version", "3\n"}});
}

}  // namespace moequant::cli
