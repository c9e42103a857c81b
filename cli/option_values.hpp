// Checks of numeric option values: a count that is negative, zero where it must be positive, or
// a NaN or infinite number is a usage error naming the option, never a wrapped size_t or a
// cast of NaN to an integer.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <initializer_list>

namespace moequant::cli {

// Every numeric option given in `parsed`: Error(usage) when it is negative (unsigned options
// would wrap -1 to 2^64-1) or not a finite number. parse_command_line runs it.
void check_numeric_options(const boost::program_options::parsed_options& parsed,
                           const boost::program_options::variables_map& vm);

// Error(usage) for each of `names` given on the command line with the value 0.
void require_positive(const boost::program_options::variables_map& vm, std::initializer_list<const char*> names);

// --max-memory GB as bytes (saturating; 0, the default, means no limit).
std::uint64_t memory_limit_bytes(double gigabytes);

}  // namespace moequant::cli
