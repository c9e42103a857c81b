// Number formatting for terminal output.
#pragma once

#include <cstdint>
#include <string>

namespace moequant::cli {

// 1234567 -> "1,234,567"
std::string with_commas(std::uint64_t value);
// 1536 -> "1.5 KiB"; below 1024 -> "N B"
std::string human_bytes(std::uint64_t bytes);

}  // namespace moequant::cli
