// Checkpoints the encoding suites write: tensors given as raw bytes, a config.json text, and
// the build's encoding plugins they name attached (loaded once per set, kept for the process).
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/dtype.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/tensor.hpp>

#include "test_support.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace moequant::test {

struct StoredTensor {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<std::uint8_t> bytes;
};

// The little-endian bytes of a vector of plain values.
template <class T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& values) {
    std::vector<std::uint8_t> out(values.size() * sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
    return out;
}

// A registry holding moequant-encoding-<id>.so for every id, from the build's plugin folder.
const Registry& encoding_registry(const std::vector<std::string>& ids);

// model.safetensors with `tensors` and config.json with `config` in `dir`, opened with the
// encodings `ids` attached in that order.
Checkpoint write_encoded_checkpoint(const TempDir& dir, const std::vector<StoredTensor>& tensors, const std::string& config,
                                    const std::vector<std::string>& ids);

// A decoded tensor's elements: BF16 bits or F32 values.
std::vector<std::uint16_t> bf16_values(const Tensor& t);
std::vector<float> f32_values(const Tensor& t);

}  // namespace moequant::test
