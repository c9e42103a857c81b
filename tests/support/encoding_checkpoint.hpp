// Small checkpoints for the encoding suites: tensors written into one model.safetensors with a
// config.json, opened with the first-party encoding plugins of this build attached (what the
// host does with every installed encoding).
#pragma once

#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/source_encoding.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace moequant {
class Registry;
}

namespace moequant::test {

// A tensor to store: header entry plus bytes.
struct StoredTensor {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<std::uint8_t> bytes;
};

template <class T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& values) {
    std::vector<std::uint8_t> out(values.size() * sizeof(T));
    std::memcpy(out.data(), values.data(), out.size());
    return out;
}

// The first-party encoding plugins of this build, loaded once.
const Registry& encoding_plugins();

// A one-file checkpoint in `dir` with these tensors and config.json, encodings attached.
Checkpoint write_checkpoint(const TempDir& dir, const std::vector<StoredTensor>& tensors,
                                    const std::string& config = "{}");

// `tensors` with the one named `name` replaced by `replacement`, or removed when `replacement`
// has no name (a replacement for a name not there is added).
std::vector<StoredTensor> with_replaced(const std::vector<StoredTensor>& tensors, const std::string& name,
                                        const StoredTensor& replacement);

// The BF16 bits, or the float32 values, of a decoded tensor.
std::vector<std::uint16_t> bf16_values(const Tensor& t);
std::vector<float> f32_values(const Tensor& t);

// Checks (Boost.Test) that decoding `window` of `w` gives the bytes of those rows and columns of
// `full`, the decode of the window's whole matrix.
void check_window_against(const Tensor& full, const Checkpoint& c, const EncodedWeight& w, const DecodeWindow& window,
                          DecodeTarget target);

}  // namespace moequant::test
