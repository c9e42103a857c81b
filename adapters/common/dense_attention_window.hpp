// Sparse attention that computes exactly dense attention up to a sample length: DeepSeek-V3.2's
// and GLM-5's indexers keep index_topk keys, MiniMax-M3's keeps sparse_topk_blocks blocks of
// sparse_block_size keys. While a sample fits, every visible key is kept and the dense forward
// is the model's; longer samples are refused rather than calibrated on a forward the model does
// not compute.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace moequant::adapters {

struct DenseAttentionWindow {
    std::int64_t tokens = 0;  // the longest sample the sparse attention keeps whole; 0 = always dense
    std::string family;       // e.g. "DeepSeek-V3.2", named in the refusal
    std::string setting;      // the config setting that sets it, e.g. "index_topk"
    std::string config_file;
};

// Error(input, SequenceTooLong) naming config.json when a sample is longer than the window.
void check_dense_attention_window(const DenseAttentionWindow& window, std::span<const std::int64_t> sample_lengths);

}  // namespace moequant::adapters
