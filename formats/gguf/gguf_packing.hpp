// How a GGUF output's tensors fall into files. By default one gguf-split part per MoE layer
// (the layer's stacked experts, written as it completes) after a first part with the metadata
// and every other tensor. Packed instead — by --split-max-size / --split-max-tensors with
// gguf-split's rule, or into one file (--single-file) — the tensors go in model order (token
// embedding, then block by block, then the head) and each layer's experts are staged in a file
// of their own until the run's end folds them into the parts.
#pragma once

#include <moequant/options.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace moequant::formats {

struct GgufPacking {
    std::uint64_t max_bytes = 0;   // a part's tensor data at most (0: no bound)
    std::int64_t max_tensors = 0;  // a part's tensors at most (0: no bound)
    bool single_file = false;      // model.gguf, without split keys
    bool packed() const noexcept { return single_file || max_bytes > 0 || max_tensors > 0; }
};

// From the format options split_max_size ("N", "NK", "NM", "NG": decimal units, as gguf-split and
// convert_hf_to_gguf.py count), split_max_tensors and single_file; Error(usage) for a bad value or
// for asking two of them at once.
GgufPacking read_gguf_packing(const Options& options);

// The index of the first tensor of each part, for tensors of `padded_bytes` each (their data
// padded to the alignment), in order. gguf-split's rule: a part ends before the tensor that would
// take its data past max_bytes, or every max_tensors tensors; a tensor larger than max_bytes
// sits alone in its part (gguf-split refuses that only for the first tensor).
std::vector<std::size_t> gguf_part_starts(const std::vector<std::uint64_t>& padded_bytes, const GgufPacking& packing);

// The order packed files hold the tensors in: token_embd first, then block by block (its other
// tensors by name, then its stacked experts gate, up, down), then the rest by name. The key
// sorts as that order.
struct GgufTensorOrder {
    std::int64_t block = 0;  // -1 before the blocks, blocks, then INT64_MAX after them
    int kind = 0;            // 0: by name, 1..3: the stacked experts gate, up, down
    std::string name;
    auto operator<=>(const GgufTensorOrder&) const = default;
};
GgufTensorOrder gguf_tensor_order(const std::string& gguf_name);

}  // namespace moequant::formats
