#include "dense_attention_window.hpp"

#include <moequant/error.hpp>

namespace moequant::adapters {

void check_dense_attention_window(const DenseAttentionWindow& window, std::span<const std::int64_t> sample_lengths) {
    if (window.tokens <= 0) return;
    for (std::int64_t n : sample_lengths)
        if (n > window.tokens)
            throw Error(ErrorKind::input,
                        "a calibration sample has " + std::to_string(n) + " tokens, more than " + window.setting + " (" +
                            std::to_string(window.tokens) + "): beyond it " + window.family +
                            "'s sparse attention differs from the dense forward used for calibration",
                        {.file = window.config_file, .code = "SequenceTooLong",
                         .hint = "pass --max_sequence_length " + std::to_string(window.tokens) + " or less"});
}

}  // namespace moequant::adapters
