// A scratch file a command writes as it goes and reads back at its end (so what it gathers
// over a run waits on disk, not in memory): appended to, read anywhere, removed when destroyed.
// It lives in a scratch folder (scratch_folder.hpp), which a fault removes with it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

namespace moequant::cli {

class SpoolFile {
public:
    // Creates `path` (replacing a leftover of an earlier run); Error(io) naming it when it cannot.
    explicit SpoolFile(std::filesystem::path path);
    ~SpoolFile();
    SpoolFile(const SpoolFile&) = delete;
    SpoolFile& operator=(const SpoolFile&) = delete;

    // Writes `bytes` at the end; returns where they start. Error(io) when the disk refuses.
    std::uint64_t append(std::span<const std::byte> bytes);
    // Reads `out.size()` bytes at `offset`; Error(internal) past what was appended.
    void read_at(std::uint64_t offset, std::span<std::byte> out) const;

private:
    std::filesystem::path path_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

}  // namespace moequant::cli
