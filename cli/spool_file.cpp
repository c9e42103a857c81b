#include "spool_file.hpp"

#include <moequant/error.hpp>

#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace moequant::cli {

SpoolFile::SpoolFile(std::filesystem::path path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
    if (fd_ < 0)
        throw Error(ErrorKind::io, std::string("cannot create a scratch file: ") + std::strerror(errno),
                    {.file = path_.string(), .code = "WriteFailed"});
}

SpoolFile::~SpoolFile() {
    ::close(fd_);
    std::error_code ec;
    std::filesystem::remove(path_, ec);
}

std::uint64_t SpoolFile::append(std::span<const std::byte> bytes) {
    const std::uint64_t start = size_;
    for (std::size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(size_ + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            throw Error(ErrorKind::io, std::string("cannot write the scratch file: ") + (n < 0 ? std::strerror(errno) : "no space written"),
                        {.file = path_.string(), .code = "WriteFailed"});
        done += static_cast<std::size_t>(n);
    }
    size_ += bytes.size();
    return start;
}

void SpoolFile::read_at(std::uint64_t offset, std::span<std::byte> out) const {
    if (offset > size_ || out.size() > size_ - offset)
        throw Error(ErrorKind::internal, "a read past the end of scratch file " + path_.string());
    for (std::size_t done = 0; done < out.size();) {
        const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            throw Error(ErrorKind::io, std::string("cannot read the scratch file back: ") + (n < 0 ? std::strerror(errno) : "it ended early"),
                        {.file = path_.string(), .code = "ReadFailed"});
        done += static_cast<std::size_t>(n);
    }
}

}  // namespace moequant::cli
