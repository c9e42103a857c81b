#include <moequant/engine/output_lock.hpp>
#include <moequant/error.hpp>
#include <moequant/fault_handler.hpp>
#include <moequant/file_identity.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace moequant {

namespace {

[[noreturn]] void fail_to_lock(const std::filesystem::path& path, int e) {
    if (e == EWOULDBLOCK)
        throw Error(ErrorKind::io, "another moequant run is writing this output folder (its lock is held)",
                    {.file = path.string(), .code = "OutputLocked", .hint = "wait for that run to end, or choose another output folder"});
    if (e == ELOOP)
        throw Error(ErrorKind::io, "the output lock is a symbolic link", {.file = path.string(), .code = "UnsafeLock"});
    throw Error(ErrorKind::io, std::string("cannot lock the output folder: ") + std::strerror(e),
                {.file = path.string(), .code = "WriteFailed"});
}

}  // namespace

OutputFolderLock::OutputFolderLock(std::filesystem::path dir, Where where)
    : path_(where == Where::lock_file ? dir / output_lock_name : std::move(dir)), where_(where) {
    // O_NOFOLLOW: a symlink planted under the lock's name is refused, never followed.
    const int flags = where_ == Where::lock_file ? O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC
                                                 : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    for (;;) {
        fd_ = ::open(path_.c_str(), flags, 0644);
        if (fd_ < 0) fail_to_lock(path_, errno);
        struct stat held {};
        if (::fstat(fd_, &held) != 0 || (where_ == Where::lock_file && !S_ISREG(held.st_mode))) {
            ::close(fd_);
            throw Error(ErrorKind::io, "the output lock is not a regular file", {.file = path_.string(), .code = "UnsafeLock"});
        }
        int locked;
        while ((locked = ::flock(fd_, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
        }
        if (locked != 0) {
            const int e = errno;
            ::close(fd_);
            fail_to_lock(path_, e);
        }
        // The run that held it may have unlinked the file between our open and our flock: then
        // take the one now under the name.
        if (names_same_file(fd_, path_)) {
            if (where_ == Where::lock_file) fault_slot_ = remove_on_fault(path_);  // no destructor runs when a mapped input faults
            return;
        }
        ::close(fd_);
    }
}

OutputFolderLock::~OutputFolderLock() {
    // Unlinked while still held: a run that starts now creates and locks a new file, and nothing
    // of this run is written any more.
    if (where_ == Where::lock_file) ::unlink(path_.c_str());
    forget_on_fault(fault_slot_);
    ::close(fd_);
}

}  // namespace moequant
