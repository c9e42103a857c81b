// A tensor's contents as the tests compare them: all its bytes, or one element read from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace moequant::test {

// The bytes of a Tensor or a TensorView.
template <class AnyTensor> std::vector<std::uint8_t> bytes_of(const AnyTensor& t) {
    const auto* first = reinterpret_cast<const std::uint8_t*>(t.data());
    return {first, first + t.size_bytes()};
}

// Element i of a tensor, read as a T (the data need not be aligned for T).
template <class T, class AnyTensor> T element(const AnyTensor& t, std::size_t i) {
    T out;
    std::memcpy(&out, t.data() + i * sizeof(T), sizeof(T));
    return out;
}

}  // namespace moequant::test
