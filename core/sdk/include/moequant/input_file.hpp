// Opening and reading input files so that hostile ones cannot hang or exhaust the process:
// only regular files are read (a symlink to one is fine); a FIFO, a device or a folder is
// refused before a single byte is read, and files read whole have a stated size limit
// (docs/safety.md, "Input limits").
#pragma once

#include <moequant/export.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace moequant {

// Limits for inputs read whole. Real models need far less: DeepSeek-V3's tokenizer.json is
// ~8 MB, Qwen's ~11 MB, an index a few MB.
inline constexpr std::uint64_t json_file_limit = 64ull << 20;        // config.json, index, run manifest, ...
inline constexpr std::uint64_t tokenizer_file_limit = 256ull << 20;  // tokenizer.json and copied side files
inline constexpr std::uint64_t dataset_file_limit = 1ull << 30;      // a --dataset JSONL file

// A regular file opened read-only; the descriptor is closed on destruction.
class MOEQUANT_API InputFile {
public:
    InputFile() = default;
    // Opens with O_RDONLY | O_CLOEXEC | O_NONBLOCK (so that opening a FIFO never blocks) and
    // checks with fstat that it is a regular file. Error(input) naming the file, code
    // NotFound, NotARegularFile or ReadFailed.
    static InputFile open(const std::filesystem::path& path);
    ~InputFile();
    InputFile(InputFile&& other) noexcept;
    InputFile& operator=(InputFile&& other) noexcept;
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    int fd() const noexcept { return fd_; }
    // The size fstat reported when the file was opened.
    std::uint64_t size() const noexcept { return size_; }
    const std::filesystem::path& path() const noexcept { return path_; }

    // Reads exactly `size` bytes at `offset`; Error(input, ReadFailed) naming the file on an
    // error or an early end of file.
    void read_at(void* buffer, std::size_t size, std::uint64_t offset) const;

private:
    int fd_ = -1;
    std::uint64_t size_ = 0;
    std::filesystem::path path_;
};

// Error(input, NotARegularFile) unless `path` is (or links to) a regular file; NotFound when it
// does not exist. Opens nothing that could block (see InputFile::open).
MOEQUANT_API void require_regular_file(const std::filesystem::path& path);

// require_regular_file(), and Error(input, FileTooLarge) when it holds more than `max_bytes`:
// a file read later (a side file copied at the end) is checked up front.
MOEQUANT_API void require_small_file(const std::filesystem::path& path, std::uint64_t max_bytes);

// The whole file, at most `max_bytes` of it: Error(input, FileTooLarge) naming the file and the
// limit when it is larger (or grows past the limit while read).
MOEQUANT_API std::string read_small_file(const std::filesystem::path& path, std::uint64_t max_bytes);

}  // namespace moequant
