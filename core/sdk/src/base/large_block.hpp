// Large tensor buffers mapped on their own, in transparent huge pages where the kernel allows.
//
// In the VMs we measure on, first-touching fresh memory costs more than the products that fill
// it: a 205 MB Hessian's sums took 0.2 s to fault in 4 KiB pages, a third of its BF16
// accumulation. Mapped 2 MiB-aligned with MADV_HUGEPAGE and populated in one call, the same
// block faults in 512 times fewer pages and its later passes miss the TLB less. Such a block is
// its own mapping, so the advice ends with it (glibc's hugetlb tunable, which advises the whole
// heap, raised small runs' peak memory). Only blocks of large_block_bytes or more: a block is
// rounded up to whole 2 MiB pages, at most 1/8 more memory.
#pragma once

#include <cstddef>

namespace moequant::detail {

inline constexpr std::size_t large_block_bytes = std::size_t{16} << 20;

// A zero-filled, populated block of at least `bytes` (>= large_block_bytes), 2 MiB aligned;
// nullptr when the kernel refuses the mapping.
std::byte* map_large_block(std::size_t bytes) noexcept;

// Unmaps p if map_large_block made it and returns true; false for any other pointer.
bool unmap_large_block(std::byte* p) noexcept;

}  // namespace moequant::detail
