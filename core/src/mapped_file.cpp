#include "mapped_file.hpp"

#include <moequant/error.hpp>

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace moequant::detail {

MappedFile::MappedFile(int fd, std::size_t size, const std::filesystem::path& path) : size_(size) {
    if (size == 0) return;
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        throw_io_error(std::string("cannot map the file into memory: ") + std::strerror(errno),
                       {.file = path.string()});
    data_ = static_cast<std::byte*>(p);
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(data_, size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (data_) ::munmap(data_, size_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

}  // namespace moequant::detail
