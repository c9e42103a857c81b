#include "large_block.hpp"

#include <moequant/error.hpp>
#include <moequant/tensor.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace moequant {

namespace {

// Fresh memory is faulted in a page at a time when first touched, which costs about 10 us a
// page in the VMs we measured on (0.4 GB/s for a 200 MB Hessian); asking the kernel to populate
// a large block in one call is about 15x faster. Best effort: a kernel without
// MADV_POPULATE_WRITE refuses it, and the pages then fault in as before.
void populate(std::byte* p, std::size_t n) noexcept {
    constexpr std::size_t worth_it = std::size_t{1} << 20;
    if (n < worth_it) return;
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const std::uintptr_t first = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
    const std::uintptr_t last = (reinterpret_cast<std::uintptr_t>(p) + n) & ~(page - 1);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
}

}  // namespace

std::optional<std::uint64_t> shape_elements(const Shape& shape) noexcept {
    std::uint64_t n = 1;
    for (std::int64_t d : shape) {
        if (d < 0) return std::nullopt;
        if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) return std::nullopt;
    }
    return n;
}

std::string shape_to_string(const Shape& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

void Tensor::AlignedFree::operator()(std::byte* p) const noexcept {
    if (!detail::unmap_large_block(p)) std::free(p);
}

Tensor::Tensor(DType dtype, Shape shape) : Tensor(dtype, std::move(shape), true) {}

Tensor Tensor::uninitialized(DType dtype, Shape shape) { return Tensor(dtype, std::move(shape), false); }

Tensor::Tensor(DType dtype, Shape shape, bool zero) : dtype_(dtype), shape_(std::move(shape)) {
    auto elements = shape_elements(shape_);
    auto bytes = elements ? dtype_byte_size(dtype_, *elements) : std::nullopt;
    if (!bytes)
        throw_input_error("cannot allocate " + std::string(dtype_name(dtype_)) + " " +
                          shape_to_string(shape_) + ": invalid shape or not a whole number of bytes");
    size_ = static_cast<std::size_t>(*bytes);
    if (std::byte* block = detail::map_large_block(size_)) {  // zero-filled already
        data_.reset(block);
        return;
    }
    // aligned_alloc needs a size that is a multiple of the alignment.
    std::size_t padded = (size_ + alignment - 1) / alignment * alignment;
    if (padded == 0) padded = alignment;
    auto* p = static_cast<std::byte*>(std::aligned_alloc(alignment, padded));
    if (!p) throw std::bad_alloc();
    populate(p, padded);
    if (zero) std::memset(p, 0, padded);
    else if (padded > size_) std::memset(p + size_, 0, padded - size_);  // keep the padding defined
    data_.reset(p);
}

Tensor Tensor::copy_of(const TensorView& view) {
    Tensor t(view.dtype, view.shape);
    if (t.size_bytes() != view.bytes.size())
        throw_input_error("tensor view holds " + std::to_string(view.bytes.size()) +
                          " bytes but " + std::string(dtype_name(view.dtype)) + " " +
                          shape_to_string(view.shape) + " needs " + std::to_string(t.size_bytes()));
    if (!view.bytes.empty()) std::memcpy(t.data(), view.bytes.data(), view.bytes.size());
    return t;
}

}  // namespace moequant
