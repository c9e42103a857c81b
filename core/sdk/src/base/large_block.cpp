#include "large_block.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace moequant::detail {

namespace {

constexpr std::uintptr_t huge_page = std::uintptr_t{2} << 20;

// The live blocks (start -> length). Never destroyed, so that a Tensor freed by a static
// destructor after this file's statics still finds it.
struct Registry {
    std::mutex mutex;
    std::map<std::uintptr_t, std::size_t> blocks;
    std::atomic<std::size_t> live{0};
};

Registry& registry() {
    static Registry* r = new Registry;
    return *r;
}

}  // namespace

std::byte* map_large_block(std::size_t bytes) noexcept {
    if (bytes < large_block_bytes || bytes > SIZE_MAX / 2) return nullptr;
    const std::size_t length = (bytes + huge_page - 1) & ~(huge_page - 1);
    // One huge page more than needed, so that a 2 MiB-aligned start lies inside; the rest is
    // unmapped again.
    void* raw = ::mmap(nullptr, length + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const auto first = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t start = (first + huge_page - 1) & ~(huge_page - 1);
    if (start > first) ::munmap(raw, start - first);
    if (first + huge_page > start) ::munmap(reinterpret_cast<void*>(start + length), first + huge_page - start);
    // Both best effort: without THP the block keeps 4 KiB pages; a kernel before 5.14 refuses
    // the populate and the pages fault in on first touch.
    ::madvise(reinterpret_cast<void*>(start), length, MADV_HUGEPAGE);
    ::madvise(reinterpret_cast<void*>(start), length, MADV_POPULATE_WRITE);
    Registry& r = registry();
    try {
        std::lock_guard lock(r.mutex);
        r.blocks.emplace(start, length);
    } catch (...) {
        ::munmap(reinterpret_cast<void*>(start), length);
        return nullptr;
    }
    r.live.fetch_add(1, std::memory_order_release);
    return reinterpret_cast<std::byte*>(start);
}

bool unmap_large_block(std::byte* p) noexcept {
    Registry& r = registry();
    if (p == nullptr || r.live.load(std::memory_order_acquire) == 0) return false;
    // Every large block starts on a huge page: other pointers (nearly every Tensor freed while
    // a large block lives) are told apart without the lock.
    if ((reinterpret_cast<std::uintptr_t>(p) & (huge_page - 1)) != 0) return false;
    std::size_t length = 0;
    {
        std::lock_guard lock(r.mutex);
        auto it = r.blocks.find(reinterpret_cast<std::uintptr_t>(p));
        if (it == r.blocks.end()) return false;
        length = it->second;
        r.blocks.erase(it);
    }
    r.live.fetch_sub(1, std::memory_order_release);
    ::munmap(p, length);
    return true;
}

}  // namespace moequant::detail
