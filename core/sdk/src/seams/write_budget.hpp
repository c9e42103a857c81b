// Test seam: a budget on the bytes OutputFile writes, so the tests can fill the disk at a chosen
// point. Only the test build of the host (tests/support/fault_host_main.cpp) sets it; the
// release host never does. Not installed, not part of the plugin SDK.
#pragma once

#include <moequant/export.hpp>

#include <cstddef>
#include <cstdint>

namespace moequant::seams {

// Every OutputFile write past `bytes` in total (across all OutputFiles of the process) fails
// with ENOSPC, as on a full disk. Unlimited unless set; set it before the first write.
MOEQUANT_API void limit_output_writes(std::uint64_t bytes);

// False (with errno = ENOSPC) when writing `n` more bytes would pass the budget.
bool output_write_allowed(std::size_t n);

}  // namespace moequant::seams
