#include <moequant/dtype.hpp>

#include <array>

namespace moequant {
namespace {

struct DTypeInfo {
    std::string_view name;
    unsigned bits;
    bool is_float;
};

// Indexed by the DType value; the order is the reference enum order (see dtype.hpp).
constexpr std::array<DTypeInfo, dtype_count> table{{
    {"BOOL", 8, false},    {"F4", 4, true},       {"F6_E2M3", 6, true},     {"F6_E3M2", 6, true},
    {"U8", 8, false},      {"I8", 8, false},      {"F8_E5M2", 8, true},     {"F8_E4M3", 8, true},
    {"F8_E8M0", 8, true},  {"F8_E4M3FNUZ", 8, true}, {"F8_E5M2FNUZ", 8, true},
    {"I16", 16, false},    {"U16", 16, false},    {"F16", 16, true},        {"BF16", 16, true},
    {"I32", 32, false},    {"U32", 32, false},    {"F32", 32, true},        {"C64", 64, true},
    {"F64", 64, true},     {"I64", 64, false},    {"U64", 64, false},
}};

const DTypeInfo& info(DType d) noexcept { return table[static_cast<std::size_t>(d)]; }

}  // namespace

unsigned dtype_bits(DType dtype) noexcept { return info(dtype).bits; }
std::string_view dtype_name(DType dtype) noexcept { return info(dtype).name; }
bool dtype_is_float(DType dtype) noexcept { return info(dtype).is_float; }

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
    for (std::size_t i = 0; i < table.size(); ++i)
        if (table[i].name == name) return static_cast<DType>(i);
    return std::nullopt;
}

std::optional<std::uint64_t> dtype_byte_size(DType dtype, std::uint64_t elements) noexcept {
    std::uint64_t bits = 0;
    if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(dtype_bits(dtype)), &bits))
        return std::nullopt;
    if (bits % 8 != 0) return std::nullopt;
    return bits / 8;
}

}  // namespace moequant
