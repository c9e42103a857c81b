// Comparing two converted outputs (moequant verify OUT_A OUT_B), the job of kt-kernel's
// compare_weights.py done exactly: every quantized part of either output, byte for byte,
// whatever their formats (merged vs merged, tree vs tree, merged vs tree). Only outputs of the
// same method and part count are comparable; anything else is refused up front.
#pragma once

#include <moequant/output_format.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace moequant {

// One stored tensor ("weight", "scale") of a part that is not identical in both outputs.
struct PartDifference {
    StoredPartKey key;
    std::string tensor;             // empty when the whole part is missing on one side
    std::string location_a, location_b;
    std::uint64_t bytes = 0;        // size of the tensor (of A when the sizes differ)
    std::uint64_t differing_bytes = 0;
    std::uint64_t first_difference = 0;  // byte offset of the first differing byte
    std::string problem;            // "missing in A", "size differs", "bytes differ", ...
};

struct ComparisonReport {
    std::string method;
    int parts = 0;
    std::size_t parts_compared = 0;  // parts present in both
    std::uint64_t bytes_compared = 0;
    std::vector<PartDifference> differences;

    bool identical() const noexcept { return differences.empty(); }
};

// Error(input, code NotComparable) when the recorded methods or part counts differ.
ComparisonReport compare_outputs(const OutputReader& a, const OutputReader& b);

}  // namespace moequant
