#include "gguf_container.hpp"

#include <moequant/error.hpp>
#include <moequant/input_file.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <set>

namespace moequant::formats {
namespace {

constexpr char magic[4] = {'G', 'G', 'U', 'F'};

// Bytes of one scalar element; 0 for string and array.
std::size_t scalar_bytes(GgufType type) noexcept {
    switch (type) {
    case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
    case GgufType::u16: case GgufType::i16: return 2;
    case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
    case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
    case GgufType::string: case GgufType::array: return 0;
    }
    return 0;
}

bool known_type(std::uint32_t t) noexcept { return t <= static_cast<std::uint32_t>(GgufType::f64); }

template <class T>
void put(std::string& out, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
}

void put_string(std::string& out, std::string_view s) {
    put<std::uint64_t>(out, s.size());
    out.append(s);
}

template <class T>
GgufValue scalar(GgufType type, T v) {
    GgufValue value;
    value.type = type;
    put(value.bytes, v);
    return value;
}

template <class T>
GgufValue scalar_array(GgufType element, const std::vector<T>& v) {
    GgufValue value;
    value.type = GgufType::array;
    value.element = element;
    value.count = v.size();
    for (const T& x : v) put(value.bytes, x);
    return value;
}

std::uint64_t padded(std::uint64_t n, std::uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// A cursor over untrusted bytes: every read is bounded by the end of the file.
class Cursor {
public:
    Cursor(std::span<const std::byte> bytes, const std::string& file) : bytes_(bytes), file_(file) {}

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(ErrorKind::input, "is no valid GGUF file: " + what + " (at byte " + std::to_string(at_) + ")",
                    {.file = file_, .code = "BadGguf"});
    }
    std::size_t position() const noexcept { return at_; }
    std::size_t left() const noexcept { return bytes_.size() - at_; }

    void read(void* out, std::size_t n, const char* what) {
        if (n > left()) fail(std::string("the file ends inside ") + what);
        std::memcpy(out, bytes_.data() + at_, n);
        at_ += n;
    }
    template <class T>
    T get(const char* what) {
        T v;
        read(&v, sizeof v, what);
        return v;
    }
    std::string string(const char* what) {
        const auto n = get<std::uint64_t>(what);
        if (n > left()) fail(std::string("a string of ") + std::to_string(n) + " bytes runs past the end (" + what + ")");
        std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), static_cast<std::size_t>(n));
        at_ += static_cast<std::size_t>(n);
        return s;
    }
    // The bytes of `count` strings, each kept with its length prefix (how GgufValue stores them).
    std::string string_elements(std::uint64_t count, const char* what) {
        const std::size_t start = at_;
        for (std::uint64_t i = 0; i < count; ++i) string(what);
        return std::string(reinterpret_cast<const char*>(bytes_.data() + start), at_ - start);
    }

private:
    std::span<const std::byte> bytes_;
    const std::string& file_;
    std::size_t at_ = 0;
};

GgufValue read_value(Cursor& in, GgufType type, const std::string& key) {
    GgufValue value;
    value.type = type;
    if (type == GgufType::string) {
        const std::string s = in.string(key.c_str());
        put_string(value.bytes, s);
        return value;
    }
    if (type != GgufType::array) {
        value.bytes.resize(scalar_bytes(type));
        in.read(value.bytes.data(), value.bytes.size(), key.c_str());
        return value;
    }
    const auto element = in.get<std::uint32_t>("an array's element type");
    if (!known_type(element)) in.fail("key '" + key + "' has an array of unknown type " + std::to_string(element));
    if (element == static_cast<std::uint32_t>(GgufType::array)) in.fail("key '" + key + "' is a nested array");
    value.element = static_cast<GgufType>(element);
    value.count = in.get<std::uint64_t>("an array's length");
    if (value.element == GgufType::string) {
        // Each string takes at least its 8-byte length: a count beyond that is a lie.
        if (value.count > in.left() / 8) in.fail("key '" + key + "' claims " + std::to_string(value.count) + " strings");
        value.bytes = in.string_elements(value.count, key.c_str());
    } else {
        const std::size_t size = scalar_bytes(value.element);
        if (value.count > in.left() / size) in.fail("key '" + key + "' claims " + std::to_string(value.count) + " elements");
        value.bytes.resize(static_cast<std::size_t>(value.count) * size);
        in.read(value.bytes.data(), value.bytes.size(), key.c_str());
    }
    return value;
}

// The scalar at the start of `bytes`; nullopt when they are too short (a value built by hand).
template <class T>
std::optional<T> scalar_value(const std::string& bytes, std::size_t at = 0) {
    if (bytes.size() < at || bytes.size() - at < sizeof(T)) return std::nullopt;
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return v;
}

}  // namespace

std::string_view gguf_type_name(GgufType type) noexcept {
    static constexpr std::array<std::string_view, 13> names = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                               "bool", "string", "array", "u64", "i64", "f64"};
    const auto i = static_cast<std::size_t>(type);
    return i < names.size() ? names[i] : std::string_view("unknown");
}

GgufValue GgufValue::u32(std::uint32_t v) { return scalar(GgufType::u32, v); }
GgufValue GgufValue::i32(std::int32_t v) { return scalar(GgufType::i32, v); }
GgufValue GgufValue::u16(std::uint16_t v) { return scalar(GgufType::u16, v); }
GgufValue GgufValue::u64(std::uint64_t v) { return scalar(GgufType::u64, v); }
GgufValue GgufValue::f32(float v) { return scalar(GgufType::f32, v); }
GgufValue GgufValue::boolean(bool v) { return scalar(GgufType::boolean, static_cast<std::uint8_t>(v ? 1 : 0)); }
GgufValue GgufValue::string(std::string_view v) {
    GgufValue value;
    value.type = GgufType::string;
    put_string(value.bytes, v);
    return value;
}
GgufValue GgufValue::strings(const std::vector<std::string>& v) {
    GgufValue value;
    value.type = GgufType::array;
    value.element = GgufType::string;
    value.count = v.size();
    for (const auto& s : v) put_string(value.bytes, s);
    return value;
}
GgufValue GgufValue::f32s(const std::vector<float>& v) { return scalar_array(GgufType::f32, v); }
GgufValue GgufValue::i32s(const std::vector<std::int32_t>& v) { return scalar_array(GgufType::i32, v); }
GgufValue GgufValue::booleans(const std::vector<std::uint8_t>& v) { return scalar_array(GgufType::boolean, v); }

std::optional<std::uint64_t> GgufValue::as_unsigned() const {
    switch (type) {
    case GgufType::u8: return scalar_value<std::uint8_t>(bytes);
    case GgufType::u16: return scalar_value<std::uint16_t>(bytes);
    case GgufType::u32: return scalar_value<std::uint32_t>(bytes);
    case GgufType::u64: return scalar_value<std::uint64_t>(bytes);
    default: return std::nullopt;
    }
}
std::optional<std::int64_t> GgufValue::as_signed() const {
    switch (type) {
    case GgufType::i8: return scalar_value<std::int8_t>(bytes);
    case GgufType::i16: return scalar_value<std::int16_t>(bytes);
    case GgufType::i32: return scalar_value<std::int32_t>(bytes);
    case GgufType::i64: return scalar_value<std::int64_t>(bytes);
    default: return std::nullopt;
    }
}
std::optional<double> GgufValue::as_float() const {
    if (type == GgufType::f32) return scalar_value<float>(bytes);
    if (type == GgufType::f64) return scalar_value<double>(bytes);
    return std::nullopt;
}
std::optional<bool> GgufValue::as_bool() const {
    if (type != GgufType::boolean || bytes.empty()) return std::nullopt;
    return bytes[0] != 0;
}
std::optional<std::string> GgufValue::as_string() const {
    if (type != GgufType::string || bytes.size() < 8) return std::nullopt;
    return bytes.substr(8);
}
std::optional<std::vector<std::string>> GgufValue::as_strings() const {
    if (type != GgufType::array || element != GgufType::string) return std::nullopt;
    std::vector<std::string> out;
    for (std::size_t at = 0; at < bytes.size();) {
        const auto n = scalar_value<std::uint64_t>(bytes, at);
        if (!n || *n > bytes.size() - at - 8) return std::nullopt;  // truncated: built by hand
        out.push_back(bytes.substr(at + 8, static_cast<std::size_t>(*n)));
        at += 8 + static_cast<std::size_t>(*n);
    }
    return out;
}

std::optional<GgmlTypeSize> ggml_type_size(std::uint32_t type) noexcept {
    // ggml's type traits (ggml 0.21.0): ids without an entry were removed from ggml.
    struct Entry {
        std::uint32_t id;
        GgmlTypeSize size;
    };
    static constexpr Entry table[] = {
        {0, {1, 4}},     {1, {1, 2}},     {2, {32, 18}},    {3, {32, 20}},    {6, {32, 22}},   {7, {32, 24}},
        {8, {32, 34}},   {9, {32, 36}},   {10, {256, 84}},  {11, {256, 110}}, {12, {256, 144}}, {13, {256, 176}},
        {14, {256, 210}}, {15, {256, 292}}, {16, {256, 66}}, {17, {256, 74}},  {18, {256, 98}},  {19, {256, 50}},
        {20, {32, 18}},  {21, {256, 110}}, {22, {256, 82}}, {23, {256, 136}}, {24, {1, 1}},     {25, {1, 2}},
        {26, {1, 4}},    {27, {1, 8}},    {28, {1, 8}},     {29, {256, 56}},  {30, {1, 2}},     {34, {256, 54}},
        {35, {256, 66}}, {39, {32, 17}},  {40, {64, 36}},   {41, {128, 18}},  {42, {64, 18}},
    };
    for (const auto& e : table)
        if (e.id == type) return e.size;
    return std::nullopt;
}

std::uint64_t gguf_tensor_bytes(const std::string& name, std::uint32_t type, const std::vector<std::int64_t>& ne) {
    const auto size = ggml_type_size(type);
    auto refuse = [&](const std::string& what) { return Error(ErrorKind::input, what, {.tensor = name, .code = "BadGguf"}); };
    if (!size) throw refuse("has unknown ggml type " + std::to_string(type));
    if (ne.empty() || ne.size() > static_cast<std::size_t>(gguf_max_dims))
        throw refuse("has " + std::to_string(ne.size()) + " dimensions; GGUF allows 1 to 4");
    std::uint64_t elements = 1;
    for (const std::int64_t n : ne) {
        if (n < 0) throw refuse("has a negative dimension");
        if (n != 0 && elements > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / static_cast<std::uint64_t>(n))
            throw refuse("has more elements than fit in 64 bits");
        elements *= static_cast<std::uint64_t>(n);
    }
    if (ne[0] % size->block != 0)
        throw refuse("has rows of " + std::to_string(ne[0]) + " values, not a multiple of its type's block of " +
                     std::to_string(size->block));
    const std::uint64_t blocks = elements / static_cast<std::uint64_t>(size->block);
    if (blocks > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / static_cast<std::uint64_t>(size->block_bytes))
        throw refuse("has more bytes than fit in 64 bits");
    return blocks * static_cast<std::uint64_t>(size->block_bytes);
}

GgufLayout lay_out_gguf(const std::vector<GgufKeyValue>& metadata, const std::vector<GgufTensorInfo>& tensors, std::uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        throw Error(ErrorKind::internal, "GGUF alignment " + std::to_string(alignment) + " is not a power of two");
    std::vector<GgufKeyValue> kv = metadata;
    for (const auto& [key, value] : kv)
        if (key == "general.alignment") throw Error(ErrorKind::internal, "general.alignment is lay_out_gguf()'s to write");
    if (alignment != gguf_default_alignment) kv.push_back({"general.alignment", GgufValue::u32(alignment)});
    for (const auto& t : tensors)
        if (t.bytes != gguf_tensor_bytes(t.name, t.type, t.ne))
            throw Error(ErrorKind::internal, "GGUF tensor '" + t.name + "' has another size than its type and dims give");
    std::set<std::string_view> keys, names;
    GgufLayout layout;
    std::string& h = layout.header;
    h.append(magic, 4);
    put<std::uint32_t>(h, gguf_version);
    put<std::int64_t>(h, static_cast<std::int64_t>(tensors.size()));
    put<std::int64_t>(h, static_cast<std::int64_t>(kv.size()));
    for (const auto& [key, value] : kv) {
        if (key.empty() || !keys.insert(key).second) throw Error(ErrorKind::internal, "GGUF key '" + key + "' is empty or repeated");
        put_string(h, key);
        put<std::uint32_t>(h, static_cast<std::uint32_t>(value.type));
        if (value.type == GgufType::array) {
            put<std::uint32_t>(h, static_cast<std::uint32_t>(value.element));
            put<std::uint64_t>(h, value.count);
        }
        h += value.bytes;
    }
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        if (t.name.size() > gguf_max_tensor_name || !names.insert(t.name).second)
            throw Error(ErrorKind::internal, "GGUF tensor name '" + t.name + "' is over 63 bytes or repeated");
        put_string(h, t.name);
        put<std::uint32_t>(h, static_cast<std::uint32_t>(t.ne.size()));
        for (const std::int64_t n : t.ne) put<std::int64_t>(h, n);
        put<std::uint32_t>(h, t.type);
        put<std::uint64_t>(h, offset);
        GgufTensorInfo placed = t;
        placed.offset = offset;  // relative for now
        layout.tensors.push_back(std::move(placed));
        offset += padded(t.bytes, alignment);
    }
    h.resize(static_cast<std::size_t>(padded(h.size(), alignment)), '\0');
    for (auto& t : layout.tensors) t.offset += h.size();
    layout.file_size = h.size() + offset;
    return layout;
}

const GgufValue* GgufFile::find(std::string_view key) const noexcept {
    for (const auto& kv : metadata)
        if (kv.key == key) return &kv.value;
    return nullptr;
}

const GgufTensorInfo* GgufFile::tensor(std::string_view name) const noexcept {
    for (const auto& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

GgufFile read_gguf_header(std::span<const std::byte> file, const std::string& file_name) {
    return read_gguf_header(file, file.size(), file_name);
}

GgufFile read_gguf_file_header(const std::string& path, std::uint64_t max_header) {
    const InputFile file = InputFile::open(path);
    std::vector<std::byte> head(static_cast<std::size_t>(std::min(file.size(), max_header)));
    file.read_at(head.data(), head.size(), 0);
    return read_gguf_header(head, file.size(), path);
}

GgufFile read_gguf_header(std::span<const std::byte> head, std::uint64_t file_size, const std::string& file_name) {
    Cursor in(head, file_name);
    char first[4];
    in.read(first, 4, "the magic");
    if (std::memcmp(first, magic, 4) != 0) in.fail("it does not start with 'GGUF'");
    GgufFile out;
    out.version = in.get<std::uint32_t>("the version");
    if (out.version != 2 && out.version != 3) in.fail("version " + std::to_string(out.version) + " (2 and 3 are read)");
    const auto n_tensors = in.get<std::int64_t>("the tensor count");
    const auto n_kv = in.get<std::int64_t>("the key count");
    // A key takes at least 8 (length) + 4 (type) + 1 bytes, a tensor info 8 + 4 + 8 + 4 + 8.
    if (n_kv < 0 || static_cast<std::uint64_t>(n_kv) > in.left() / 13) in.fail(std::to_string(n_kv) + " keys do not fit the file");
    if (n_tensors < 0 || static_cast<std::uint64_t>(n_tensors) > in.left() / 32)
        in.fail(std::to_string(n_tensors) + " tensors do not fit the file");
    std::set<std::string> keys, names;
    for (std::int64_t i = 0; i < n_kv; ++i) {
        std::string key = in.string("a key");
        if (key.empty() || !keys.insert(key).second) in.fail("key '" + key + "' is empty or repeated");
        const auto type = in.get<std::uint32_t>("a value type");
        if (!known_type(type)) in.fail("key '" + key + "' has unknown type " + std::to_string(type));
        GgufValue value = read_value(in, static_cast<GgufType>(type), key);
        out.metadata.push_back({std::move(key), std::move(value)});
    }
    if (const GgufValue* a = out.find("general.alignment")) {
        const auto v = a->type == GgufType::u32 ? a->as_unsigned() : std::nullopt;
        if (!v || *v == 0 || (*v & (*v - 1)) != 0) in.fail("general.alignment is not a u32 power of two");
        out.alignment = static_cast<std::uint32_t>(*v);
    }
    std::vector<std::uint64_t> relative;
    for (std::int64_t i = 0; i < n_tensors; ++i) {
        GgufTensorInfo t;
        t.name = in.string("a tensor name");
        if (t.name.size() > gguf_max_tensor_name || !names.insert(t.name).second)
            in.fail("tensor name '" + t.name.substr(0, 80) + "' is over 63 bytes or repeated");
        const auto dims = in.get<std::uint32_t>("a tensor's dimension count");
        if (dims < 1 || dims > static_cast<std::uint32_t>(gguf_max_dims))
            in.fail("tensor '" + t.name + "' has " + std::to_string(dims) + " dimensions");
        for (std::uint32_t d = 0; d < dims; ++d) t.ne.push_back(in.get<std::int64_t>("a tensor's dimensions"));
        t.type = in.get<std::uint32_t>("a tensor's type");
        relative.push_back(in.get<std::uint64_t>("a tensor's offset"));
        try {
            t.bytes = gguf_tensor_bytes(t.name, t.type, t.ne);
        } catch (const Error& e) {
            in.fail("tensor '" + t.name + "' " + e.message());
        }
        out.tensors.push_back(std::move(t));
    }
    out.data_offset = padded(in.position(), out.alignment);
    // ggml lays the data out in tensor-info order, each tensor padded to the alignment.
    std::uint64_t expected = 0;
    for (std::size_t i = 0; i < out.tensors.size(); ++i) {
        GgufTensorInfo& t = out.tensors[i];
        if (relative[i] != expected)
            in.fail("tensor '" + t.name + "' has offset " + std::to_string(relative[i]) + ", expected " + std::to_string(expected));
        t.offset = out.data_offset + relative[i];
        if (t.offset > file_size || t.bytes > file_size - t.offset)
            in.fail("tensor '" + t.name + "' runs past the end of the file");
        expected += padded(t.bytes, out.alignment);
    }
    return out;
}

}  // namespace moequant::formats
