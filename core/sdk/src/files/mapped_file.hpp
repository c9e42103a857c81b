// Read-only memory mapping of a whole file (private to the SDK).
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>

namespace moequant::detail {

class MappedFile {
public:
    MappedFile() = default;
    // Maps `size` bytes of the open descriptor `fd` (which may be closed afterwards).
    // Throws Error(io) naming `path` on failure. A zero size maps nothing. The range is
    // registered for the SIGBUS handler (fault_handler.hpp) while it is mapped.
    MappedFile(int fd, std::size_t size, const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

private:
    void unmap() noexcept;

    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::unique_ptr<char[]> name_;  // the path the fault handler prints; stays put when moved
    int slot_ = -1;                 // in the mapped-range registry
};

}  // namespace moequant::detail
