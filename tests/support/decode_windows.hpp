// Window checks every encoding suite runs: a window decoded through decode_weight() (split in
// row chunks over the thread pool) must equal the same slice of a full decode of its matrix.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/source_encoding.hpp>

#include <cstdint>
#include <vector>

namespace moequant::test {

// The rows of `window` (as logical row indices) whose values differ from a full decode of
// matrix window.matrix; empty when every row matches.
std::vector<std::int64_t> rows_differing_from_full_decode(const Checkpoint& checkpoint, const EncodedWeight& weight,
                                                          const DecodeWindow& window, DecodeTarget target);

}  // namespace moequant::test
