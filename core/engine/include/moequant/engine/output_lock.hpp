// One writer per output folder. A run holds an exclusive flock() for its whole length, so a
// second run into the same folder fails at once with Error(io, "OutputLocked") naming the lock,
// and the kernel releases the lock when the holder dies: a killed run never leaves a lock that
// blocks the rerun. (flock is advisory and per open file: it guards against moequant runs, which
// all take it, on local filesystems and NFS alike.)
#pragma once


#include <filesystem>

namespace moequant {

// The lock file a folder run creates in its output folder; removed when the run ends.
inline constexpr const char* output_lock_name = ".moequant.lock";

class OutputFolderLock {
public:
    enum class Where {
        lock_file,    // "<dir>/.moequant.lock" (the output folder of convert and gptq)
        folder_itself  // the folder's own descriptor (a staging folder renamed into place whole)
    };
    // Takes the lock or throws. The folder must exist.
    explicit OutputFolderLock(std::filesystem::path dir, Where where = Where::lock_file);
    ~OutputFolderLock();  // removes the lock file (if any), then releases the lock
    OutputFolderLock(const OutputFolderLock&) = delete;
    OutputFolderLock& operator=(const OutputFolderLock&) = delete;

    const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;  // the lock file, or the folder
    Where where_;
    int fd_ = -1;
    int fault_slot_ = -1;  // the lock file's remove_on_fault() slot (fault_handler.hpp)
};

}  // namespace moequant
