// The GGUF v3 container (ggml include/gguf.h and src/gguf.cpp, docs/gguf-format.md): a header,
// typed key/value metadata, tensor infos, then each tensor's data at an offset padded to the
// alignment, in tensor-info order. lay_out_gguf() makes the header bytes and every tensor's file
// offset up front, so the data can be written tensor by tensor at known places;
// read_gguf_header() parses one from untrusted bytes, checking every count, size and offset
// against the file as ggml's reader does.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::formats {

inline constexpr std::uint32_t gguf_version = 3;
inline constexpr std::uint32_t gguf_default_alignment = 32;
inline constexpr std::size_t gguf_max_tensor_name = 63;  // GGML_MAX_NAME - 1 (the terminating NUL)
inline constexpr int gguf_max_dims = 4;

// Value types as GGUF numbers them.
enum class GgufType : std::uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12
};
std::string_view gguf_type_name(GgufType type) noexcept;

// One key/value: a scalar, a string, or an array of scalars or strings. `bytes` holds the value
// as the file stores it after its type tag(s): for arrays, the elements only (`count` of them).
struct GgufValue {
    GgufType type = GgufType::u32;
    GgufType element = GgufType::u8;  // arrays
    std::uint64_t count = 1;          // arrays: elements
    std::string bytes;

    static GgufValue u32(std::uint32_t v);
    static GgufValue i32(std::int32_t v);
    static GgufValue u16(std::uint16_t v);
    static GgufValue u64(std::uint64_t v);
    static GgufValue f32(float v);
    static GgufValue boolean(bool v);
    static GgufValue string(std::string_view v);
    static GgufValue strings(const std::vector<std::string>& v);
    static GgufValue f32s(const std::vector<float>& v);
    static GgufValue i32s(const std::vector<std::int32_t>& v);
    static GgufValue booleans(const std::vector<std::uint8_t>& v);  // 0 or 1 each

    // Typed reads; nullopt when the value is of another type.
    std::optional<std::uint64_t> as_unsigned() const;  // u8 .. u64
    std::optional<std::int64_t> as_signed() const;     // i8 .. i64
    std::optional<double> as_float() const;            // f32, f64
    std::optional<bool> as_bool() const;
    std::optional<std::string> as_string() const;
    std::optional<std::vector<std::string>> as_strings() const;
};

struct GgufKeyValue {
    std::string key;
    GgufValue value;
};

// A tensor as the file describes it: dims innermost first (ggml's ne: a PyTorch [out, in] weight
// is {in, out}), ggml type id, and its data's size.
struct GgufTensorInfo {
    std::string name;
    std::vector<std::int64_t> ne;
    std::uint32_t type = 0;
    std::uint64_t bytes = 0;   // the data's size (without padding)
    std::uint64_t offset = 0;  // absolute offset of its data in the file
};

// Values per block and bytes per block of ggml type `type`; nullopt for a type this reader does not know.
struct GgmlTypeSize {
    std::int64_t block = 1;
    std::int64_t block_bytes = 0;
};
std::optional<GgmlTypeSize> ggml_type_size(std::uint32_t type) noexcept;
// The bytes of a tensor of `type` with dims `ne`: ne[0] must be a multiple of the block.
// Error(input) naming `name` otherwise, or when the size overflows.
std::uint64_t gguf_tensor_bytes(const std::string& name, std::uint32_t type, const std::vector<std::int64_t>& ne);

// The header of a GGUF file holding `metadata` and `tensors` (their `bytes` set, offsets ignored),
// with `alignment` (written as general.alignment when not 32).
struct GgufLayout {
    std::string header;                 // magic .. padding before the data
    std::vector<GgufTensorInfo> tensors;  // with their absolute offsets
    std::uint64_t file_size = 0;        // header + every tensor's data, each padded to the alignment
};
GgufLayout lay_out_gguf(const std::vector<GgufKeyValue>& metadata, const std::vector<GgufTensorInfo>& tensors,
                        std::uint32_t alignment = gguf_default_alignment);

// A parsed header (the data is not read). Error(input) naming `file` and what is wrong for
// anything ggml's reader refuses: magic, version, counts beyond the file, strings and arrays past
// its end, nested arrays, duplicate keys or tensor names, names over 63 bytes, dims, a row length
// not a multiple of the type's block, offsets not in order, data past the end of the file.
struct GgufFile {
    std::uint32_t version = 0;
    std::uint32_t alignment = gguf_default_alignment;
    std::vector<GgufKeyValue> metadata;
    std::vector<GgufTensorInfo> tensors;
    std::uint64_t data_offset = 0;

    const GgufValue* find(std::string_view key) const noexcept;
    const GgufTensorInfo* tensor(std::string_view name) const noexcept;
};
GgufFile read_gguf_header(std::span<const std::byte> file, const std::string& file_name);
// The same from the first bytes of a file of `file_size` bytes (the header must lie in `head`).
GgufFile read_gguf_header(std::span<const std::byte> head, std::uint64_t file_size, const std::string& file_name);
// The header of the GGUF file at `path`, reading at most `max_header` bytes of it.
GgufFile read_gguf_file_header(const std::string& path, std::uint64_t max_header = 256ull << 20);

}  // namespace moequant::formats
