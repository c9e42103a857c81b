// The GGUF tensor types moequant writes: ggml's type ids, block sizes and block bytes
// (ggml include/ggml.h, src/ggml-common.h; docs/gguf-quants.md), and the row codecs that
// quantize and dequantize them exactly as ggml's reference code does.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace moequant::ggml_quants {

// One row of n values (n a multiple of the type's block) into the type's blocks, as
// ggml_quantize_chunk() does: with `importance` (n per-column weights: llama.cpp's imatrix
// entry of the tensor, or of the expert), or without (null). Types that ignore an importance
// matrix in ggml ignore it here.
using QuantizeRow = void (*)(const float* x, std::uint8_t* out, std::int64_t n, const float* importance);
// One row of n values back from its blocks, as ggml's to_float does.
using DequantizeRow = void (*)(const std::uint8_t* in, float* y, std::int64_t n);

// The code grid of a type whose blocks decode every group of values through one map:
// value = step[g] * level(code) + offset[g] for integer codes in [low, high], g = index / group,
// level(code) = code (the uniform types) or table[code - low] (IQ4's non-uniform levels), with
// ggml's dequantizer's float operations (d * level - m is d * level + (-m), level - 32 of Q6_K
// a signed code, and so on). GPTQ (gguf_gptq_quantizer.hpp) keeps a block's scales and
// chooses codes on this grid.
struct CodeGrid {
    int group = 0;  // values per group
    int low = 0, high = 0;
    // The steps and offsets of one block's groups, from its bytes.
    void (*read)(const std::uint8_t* block, float* step, float* offset) = nullptr;
    // Writes a block's codes (block values, each in [low, high]) into its bytes; the scales stay.
    void (*write)(const int* codes, std::uint8_t* block) = nullptr;
    const std::int8_t* table = nullptr;  // the levels of codes low..high; null: the code itself

    float level(int code) const noexcept { return static_cast<float>(table ? table[code - low] : code); }
    // The value ggml decodes for `code` in a group of this step and offset.
    float value(float step, float offset, int code) const noexcept { return step * level(code) + offset; }
};

struct GgmlType {
    std::string_view name;  // ggml_type_name(): "q4_K", "iq4_xs", "bf16", ...
    int id = 0;             // enum ggml_type
    int block = 1;          // values per block
    int block_bytes = 0;    // bytes per block
    QuantizeRow quantize = nullptr;
    DequantizeRow dequantize = nullptr;
    const CodeGrid* grid = nullptr;  // null: no code grid per group (the floats, MXFP4)

    std::int64_t row_bytes(std::int64_t n) const noexcept { return n / block * block_bytes; }
};

// Every type moequant writes, in ggml's id order.
const std::vector<GgmlType>& ggml_types();
// The type named `name` (ggml's spelling, case-insensitive), or null.
const GgmlType* ggml_type_named(std::string_view name) noexcept;

}  // namespace moequant::ggml_quants
