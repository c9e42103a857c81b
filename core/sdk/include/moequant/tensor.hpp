// Tensors: a non-owning TensorView (what readers hand out, e.g. straight from an mmap) and an
// owning, 64-byte aligned Tensor (what kernels produce).
//
// Data is little-endian, row-major (C order), as in safetensors. A view's bytes may be
// unaligned (safetensors writers need not align), so read elements with memcpy or through
// the dtype conversion functions, never by casting the pointer.
#pragma once

#include <moequant/dtype.hpp>
#include <moequant/export.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace moequant {

// Tensor shape, outermost dimension first. An empty shape is a scalar (1 element).
using Shape = std::vector<std::int64_t>;

// Number of elements, or nullopt on a negative dimension or 64-bit overflow.
MOEQUANT_API std::optional<std::uint64_t> shape_elements(const Shape& shape) noexcept;

// "[2,3,4]" — the spelling used in every message.
MOEQUANT_API std::string shape_to_string(const Shape& shape);

// A named tensor's dtype and shape, before it has bytes: what a quantizer's parts will be
// (Quantizer::output_layout()) and what a safetensors writer will receive.
struct TensorSpec {
    std::string name;
    DType dtype = DType::U8;
    Shape shape;
};

// A typed window on bytes owned by someone else (a mapped file, a Tensor).
// Invariant (kept by whoever builds it): bytes.size() == dtype_byte_size(dtype, elements()).
struct TensorView {
    DType dtype = DType::U8;
    Shape shape;
    std::span<const std::byte> bytes;

    std::uint64_t elements() const noexcept { return shape_elements(shape).value_or(0); }
    const std::byte* data() const noexcept { return bytes.data(); }
    std::size_t size_bytes() const noexcept { return bytes.size(); }
};

// An owning tensor with a 64-byte aligned, zero-initialised buffer. A buffer of 16 MiB or more
// is mapped on its own, 2 MiB aligned, in transparent huge pages where the kernel allows: it
// faults in 512 times fewer pages than the heap's (tensor.cpp).
class MOEQUANT_API Tensor {
public:
    static constexpr std::size_t alignment = 64;

    Tensor() = default;
    // Allocates dtype_byte_size(dtype, elements(shape)); throws Error(input) if the shape is
    // invalid or the size is not a whole number of bytes.
    Tensor(DType dtype, Shape shape);
    // A deep copy of a view.
    static Tensor copy_of(const TensorView& view);
    // Like the constructor, but the bytes are left unwritten (for producers that overwrite every
    // byte; saves a pass over freshly allocated, page-faulting memory).
    static Tensor uninitialized(DType dtype, Shape shape);

    DType dtype() const noexcept { return dtype_; }
    const Shape& shape() const noexcept { return shape_; }
    std::uint64_t elements() const noexcept { return shape_elements(shape_).value_or(0); }
    std::size_t size_bytes() const noexcept { return size_; }

    std::byte* data() noexcept { return data_.get(); }
    const std::byte* data() const noexcept { return data_.get(); }
    std::span<std::byte> bytes() noexcept { return {data_.get(), size_}; }
    std::span<const std::byte> bytes() const noexcept { return {data_.get(), size_}; }

    // Typed access; T must match the element size (the buffer is aligned for any T).
    template <class T> T* data_as() noexcept { return reinterpret_cast<T*>(data_.get()); }
    template <class T> const T* data_as() const noexcept { return reinterpret_cast<const T*>(data_.get()); }

    TensorView view() const { return TensorView{dtype_, shape_, bytes()}; }

private:
    Tensor(DType dtype, Shape shape, bool zero);
    struct AlignedFree {
        void operator()(std::byte* p) const noexcept;
    };
    DType dtype_ = DType::U8;
    Shape shape_;
    std::size_t size_ = 0;
    std::unique_ptr<std::byte[], AlignedFree> data_;
};

}  // namespace moequant
