#include "mapped_file.hpp"

#include "mapped_ranges.hpp"

#include <moequant/error.hpp>
#include <moequant/printable.hpp>

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
    const std::string name = printable_name(path.string());  // the fault handler prints it as it is
    name_ = std::make_unique<char[]>(name.size() + 1);
    std::memcpy(name_.get(), name.c_str(), name.size() + 1);
    slot_ = detail::add_mapped_range(data_, size_, name_.get());
}

void MappedFile::unmap() noexcept {
    detail::remove_mapped_range(std::exchange(slot_, -1));  // before the range can be reused
    if (data_) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
    name_.reset();
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      name_(std::move(other.name_)),
      slot_(std::exchange(other.slot_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        unmap();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        name_ = std::move(other.name_);
        slot_ = std::exchange(other.slot_, -1);
    }
    return *this;
}

}  // namespace moequant::detail
