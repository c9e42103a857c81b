// Reading the 4-bit integer encodings' stored pieces (GPTQ, AWQ): 32-bit words of eight codes
// and their F16/BF16/F32 scales, at any alignment (safetensors data need not be aligned).
// Header-only.
#pragma once

#include <moequant/dtype_convert.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <cstring>

namespace moequant::encodings {

inline std::uint32_t word_at(const TensorView& words, std::size_t index) {
    std::uint32_t w;
    std::memcpy(&w, words.data() + index * 4, 4);
    return w;
}

// Scale `index` of an F32, F16 or BF16 tensor, as float32.
inline float scale_at(const TensorView& scales, std::size_t index) {
    if (scales.dtype == DType::F32) {
        float f;
        std::memcpy(&f, scales.data() + index * 4, 4);
        return f;
    }
    std::uint16_t bits;
    std::memcpy(&bits, scales.data() + index * 2, 2);
    return scales.dtype == DType::F16 ? f16_to_f32(bits) : bf16_to_f32(bits);
}

}  // namespace moequant::encodings
