// The process-wide registry of mapped input files that the SIGBUS handler (fault_handler.hpp)
// searches (private to the SDK). Lock-free, so the handler may read it.
#pragma once

#include <cstddef>

namespace moequant::detail {

// Records [begin, begin + size) as a mapping of the file `name`, which must stay valid until the
// range is removed. Returns a slot for remove_mapped_range, or -1 when the registry is full
// (the mapping then works as before; only the fault message is lost).
int add_mapped_range(const void* begin, std::size_t size, const char* name) noexcept;
void remove_mapped_range(int slot) noexcept;

// The file mapped at `address`, or nullptr. A system call that reads such memory fails with
// EFAULT where a plain read would raise SIGBUS; this tells the input's fault from the output's.
const char* mapped_file_at(const void* address) noexcept;

// What both the handler and a failed write say about a mapped input that shrank.
inline constexpr char truncated_input_reason[] = "the file shrank or became unreadable while being read";
inline constexpr char truncated_input_code[] = "FileTruncated";

}  // namespace moequant::detail
