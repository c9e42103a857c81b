// The calibration samples' hidden states between layers (float32 [tokens, hidden]): in memory,
// or in a memory-mapped scratch file when they would exceed the --max-memory budget, so the
// kernel pages them in and out a batch at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace moequant::detail {

class HiddenStates {
public:
    // `file` empty: in memory.
    HiddenStates(std::int64_t tokens, std::int64_t hidden, const std::filesystem::path& file);
    ~HiddenStates();
    HiddenStates(const HiddenStates&) = delete;
    HiddenStates& operator=(const HiddenStates&) = delete;

    // Rows [first, first + count).
    std::span<float> rows(std::int64_t first, std::int64_t count) noexcept {
        return {data_ + first * hidden_, static_cast<std::size_t>(count * hidden_)};
    }
    bool mapped() const noexcept { return mapped_; }

private:
    std::int64_t tokens_, hidden_;
    std::vector<float> memory_;
    float* data_ = nullptr;
    bool mapped_ = false;
    std::filesystem::path file_;
};

}  // namespace moequant::detail
