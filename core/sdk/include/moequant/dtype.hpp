// Element types of tensors: every dtype a safetensors header may name.
//
// The enumerators are declared in the order of the reference safetensors `Dtype` enum
// (huggingface/safetensors safetensors/src/tensor.rs): the reference writer orders tensors by
// descending dtype in this order, and SafetensorsWriter reproduces that byte for byte.
// Sizes are in bits because F4 and F6 pack several elements per byte.
#pragma once

#include <moequant/export.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace moequant {

enum class DType : std::uint8_t {
    BOOL,
    F4,           // OCP MX FP4 E2M1, two per byte
    F6_E2M3,      // OCP MX FP6
    F6_E3M2,      // OCP MX FP6
    U8,
    I8,
    F8_E5M2,      // OCP E5M2 (IEEE-like: has Inf and NaN)
    F8_E4M3,      // OCP E4M3FN (torch.float8_e4m3fn): no Inf, NaN = S.1111.111
    F8_E8M0,      // OCP UE8M0 scale: 2^(e-127), 0xFF = NaN
    F8_E4M3FNUZ,  // AMD variant: bias 8, no -0, 0x80 = NaN
    F8_E5M2FNUZ,  // AMD variant: bias 16, no -0, 0x80 = NaN
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    C64,
    F64,
    I64,
    U64,
};

inline constexpr int dtype_count = static_cast<int>(DType::U64) + 1;

// Bits per element (1 element of BOOL is 8 bits, as in safetensors).
MOEQUANT_API unsigned dtype_bits(DType dtype) noexcept;

// The safetensors spelling, e.g. "F8_E4M3".
MOEQUANT_API std::string_view dtype_name(DType dtype) noexcept;

// Parses a safetensors spelling; nullopt for unknown names (names are case-sensitive).
MOEQUANT_API std::optional<DType> dtype_from_name(std::string_view name) noexcept;

// True for the floating types (F4 … F64 including FP8 and C64).
MOEQUANT_API bool dtype_is_float(DType dtype) noexcept;

// Byte size of `elements` elements of `dtype`. nullopt when the bit count overflows 64 bits
// or is not a whole number of bytes (the reference reader's ValidationOverflow / MisalignedSlice).
MOEQUANT_API std::optional<std::uint64_t> dtype_byte_size(DType dtype, std::uint64_t elements) noexcept;

}  // namespace moequant
