// Read-only memory mapping of a whole file (private to the core).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace moequant::detail {

class MappedFile {
public:
    MappedFile() = default;
    // Maps `size` bytes of the open descriptor `fd` (which may be closed afterwards).
    // Throws Error(io) naming `path` on failure. A zero size maps nothing.
    MappedFile(int fd, std::size_t size, const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

private:
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace moequant::detail
