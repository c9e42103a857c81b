#include <moequant/error.hpp>
#include <moequant/fault_handler.hpp>
#include <moequant/file_identity.hpp>
#include <moequant/input_file.hpp>
#include <moequant/output_file.hpp>

#include "mapped_ranges.hpp"
#include "seams/write_budget.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace moequant {
namespace {

// Removes a partial file found where a new one is to be created, unless a live run holds its lock.
// Returns false when one does. A non-regular entry (a planted symlink, a FIFO) loses only its
// name: unlink() never follows a link.
bool remove_stale_partial(const std::filesystem::path& partial) {
    struct stat seen {};
    if (::lstat(partial.c_str(), &seen) != 0) return true;  // gone meanwhile: retry the create
    if (S_ISDIR(seen.st_mode)) {
        errno = EISDIR;
        return true;  // the retried create reports it
    }
    if (!S_ISREG(seen.st_mode)) {
        ::unlink(partial.c_str());
        return true;
    }
    const int fd = ::open(partial.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return true;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd);
        return false;
    }
    if (names_same_file(fd, partial)) ::unlink(partial.c_str());  // not one created since
    ::close(fd);
    return true;
}

}  // namespace

void sync_folder(const std::filesystem::path& dir) noexcept {
    int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;  // best effort: the data itself is already synced
    ::fsync(fd);
    ::close(fd);
}

std::filesystem::path partial_path_for(const std::filesystem::path& final_path) {
    return final_path.parent_path() / ("." + final_path.filename().string() + partial_marker);
}

bool is_partial_name(std::string_view name) noexcept {
    return name.size() > std::string_view(partial_marker).size() + 1 && name.front() == '.' && name.ends_with(partial_marker);
}

OutputFile::OutputFile(std::filesystem::path final_path, std::uint64_t expected_size, Durability durability)
    : final_path_(std::move(final_path)), partial_path_(partial_path_for(final_path_)), durability_(durability) {
    // A file that is not there now must not be replaced by commit(): if one appears meanwhile,
    // another run wrote it, and its bytes are not this run's to discard.
    struct stat existing {};
    may_replace_ = ::lstat(final_path_.c_str(), &existing) == 0;
    // O_EXCL | O_NOFOLLOW: never write through a link planted under the partial name, and never
    // share a partial with another run; the flock marks it live for as long as it is open.
    for (int attempt = 0; attempt < 8 && fd_ < 0; ++attempt) {
        fd_ = ::open(partial_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd_ >= 0) {
            if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) busy();
            fault_slot_ = remove_on_fault(partial_path_);  // no destructor runs when a mapped input faults
            break;
        }
        if (errno != EEXIST) fail(errno, "cannot create");
        if (!remove_stale_partial(partial_path_)) busy();
    }
    if (fd_ < 0) fail(EEXIST, "cannot create");
    if (expected_size > 0 && ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(expected_size)) != 0) {
        // Filesystems without fallocate simply do not reserve; real failures are reported.
        const int error_number = errno;
        if (error_number != EOPNOTSUPP && error_number != ENOSYS && error_number != EINTR) {
            try {
                fail(error_number, "cannot reserve space for");  // removes the partial
            } catch (...) {
                ::close(fd_);  // no destructor runs for a constructor that throws
                fd_ = -1;
                throw;
            }
        }
    }
}

OutputFile::~OutputFile() {
    if (!committed_) remove_own_partial();
    forget_on_fault(fault_slot_);
    if (fd_ >= 0) ::close(fd_);
}

void OutputFile::remove_own_partial() noexcept {
    if (fd_ >= 0 && names_same_file(fd_, partial_path_)) ::unlink(partial_path_.c_str());
}

void OutputFile::busy() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw Error(ErrorKind::io, "another moequant run is writing this file",
                {.file = final_path_.string(),
                 .code = "OutputBusy",
                 .hint = "wait for it to finish, or write elsewhere; its partial file is " + partial_path_.filename().string()});
}

void OutputFile::fail(int error_number, const char* action) {
    std::string code = error_number == ENOSPC ? "DiskFull" : error_number == EFBIG ? "FileTooLarge"
                     : error_number == EEXIST ? "OutputExists"
                     : error_number == EACCES || error_number == EPERM || error_number == EROFS ? "PermissionDenied"
                                                                                              : "WriteFailed";
    std::string hint = error_number == ENOSPC ? "free disk space and rerun the same command; completed work is kept"
                     : error_number == EFBIG ? "the file size limit (ulimit -f) or the filesystem's limit was reached"
                     : error_number == EEXIST ? "another run wrote this file meanwhile; it is kept"
                                             : "";
    {
        std::lock_guard lock(failure_mutex_);
        if (!failure_) {
            failure_ = std::make_unique<Error>(ErrorKind::io, std::string(action) + " the file: " + std::strerror(error_number),
                                               ErrorContext{.file = final_path_.string(), .code = code, .hint = hint});
            // The partial file is useless now; its name goes at once, the descriptor at destruction.
            remove_own_partial();
            failed_ = true;
        }
    }
    rethrow_failure();
}

void OutputFile::rethrow_failure() const {
    std::lock_guard lock(failure_mutex_);
    throw *failure_;
}

void OutputFile::write_at(std::uint64_t offset, std::span<const std::byte> bytes) {
    if (failed_) rethrow_failure();
    if (fd_ < 0) throw Error(ErrorKind::internal, "write after commit", {.file = final_path_.string()});
    const auto* p = reinterpret_cast<const char*>(bytes.data());
    std::size_t left = bytes.size();
    while (left > 0) {
        std::size_t chunk = std::min<std::size_t>(left, 1u << 30);
        if (!seams::output_write_allowed(chunk)) fail(errno, "cannot write");
        ssize_t n = ::pwrite(fd_, p, chunk, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            // The bytes come from a mapped input that shrank: the input's fault, not the output's.
            if (errno == EFAULT)
                if (const char* input = detail::mapped_file_at(p))
                    throw Error(ErrorKind::input, detail::truncated_input_reason,
                                {.file = input, .code = detail::truncated_input_code});
            fail(errno, "cannot write");
        }
        if (n == 0) fail(ENOSPC, "cannot write");
        p += n;
        left -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
}

void OutputFile::append(std::span<const std::byte> bytes) {
    write_at(append_offset_, bytes);
    append_offset_ += bytes.size();
}

void OutputFile::append(std::string_view text) {
    append(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

void OutputFile::commit() {
    if (failed_) rethrow_failure();
    if (fd_ < 0) throw Error(ErrorKind::internal, "commit after commit", {.file = final_path_.string()});
    const bool sync = durability_ == Durability::synced_on_commit;
    if (sync && ::fdatasync(fd_) != 0) fail(errno, "cannot flush");
    // Renamed while still open and locked: no other run can take the partial for a stale one and
    // put its own bytes under the name in between.
    int renamed = may_replace_ ? -1 : ::renameat2(AT_FDCWD, partial_path_.c_str(), AT_FDCWD, final_path_.c_str(), RENAME_NOREPLACE);
    if (renamed != 0 && (may_replace_ || errno == EINVAL || errno == ENOSYS))  // a filesystem without RENAME_NOREPLACE
        renamed = ::rename(partial_path_.c_str(), final_path_.c_str());
    if (renamed != 0) fail(errno, "cannot rename into place");
    committed_ = true;
    forget_on_fault(fault_slot_);
    fault_slot_ = -1;
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(errno, "cannot close");
    if (sync) sync_folder(final_path_.parent_path());
}

void copy_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to) {
    write_file_atomically(to, read_small_file(from, tokenizer_file_limit));
}

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
    OutputFile file(path, content.size());
    file.append(content);
    file.commit();
}

}  // namespace moequant
