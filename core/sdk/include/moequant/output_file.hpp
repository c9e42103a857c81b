// Writing output files safely: under a temporary name, renamed into place only when complete.
//
// The kt runtime and transformers load every `*.safetensors` they find, so a half-written file
// must never carry its final name. An OutputFile writes "<dir>/.<name>.moequant.partial", and
// commit() flushes it to disk (fdatasync), renames it to <name> and syncs the folder. Destroying
// an uncommitted OutputFile removes the partial file.
//
// The partial is created with O_EXCL | O_NOFOLLOW and flock()ed while it is open: a link planted
// under its name is never written through, and two runs never share one. A partial left by a
// killed run (nobody holds its lock) is removed; a live one held by another run is refused with
// Error(io, "OutputBusy"). The marker ".moequant.partial" keeps the tool from ever touching a
// user's own ".<name>.partial". Write failures become Error(io) naming the
// file, with code "DiskFull" (ENOSPC), "FileTooLarge" (EFBIG: RLIMIT_FSIZE or a filesystem
// limit; the host ignores SIGXFSZ so this is reported instead of killing the process) or
// "WriteFailed".
#pragma once

#include <moequant/error.hpp>
#include <moequant/export.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

namespace moequant {

// Ends every temporary name the tool creates (files and staging folders).
inline constexpr const char* partial_marker = ".moequant.partial";

// A file a run will write, with its size, as --dry-run predicts it (OutputFormat::planned_files).
struct PlannedFile {
    std::string name;  // relative to the output folder
    std::uint64_t bytes = 0;
    // Written during the run and removed at its end (e.g. the gguf format's staged experts): on
    // disk at the peak, not part of the output.
    bool staged = false;
};

// "<dir>/.<name>.moequant.partial" for "<dir>/<name>" (never ends in .safetensors).
MOEQUANT_API std::filesystem::path partial_path_for(const std::filesystem::path& final_path);
// True for ".<name>.moequant.partial": a temporary the tool made (never a user's own file).
MOEQUANT_API bool is_partial_name(std::string_view name) noexcept;

class MOEQUANT_API OutputFile {
public:
    // Creates the partial file (see above; never an existing one). If `expected_size` is non-zero, that much disk
    // space is reserved up front (the file size still grows only with writes), so a full disk
    // is reported before any work is done.
    //
    // Durability::caller_syncs skips the flush and folder sync in commit(): for many small files
    // inside a staging folder that the caller flushes once (syncfs) before renaming the folder
    // itself into place; the file's data is then durable only after the caller's sync.
    enum class Durability { synced_on_commit, caller_syncs };
    explicit OutputFile(std::filesystem::path final_path, std::uint64_t expected_size = 0,
                        Durability durability = Durability::synced_on_commit);
    ~OutputFile();
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    // Writes all bytes at `offset` (the file grows as needed). Safe to call from several threads
    // for disjoint ranges.
    void write_at(std::uint64_t offset, std::span<const std::byte> bytes);
    // Writes at the end of what append() wrote so far.
    void append(std::span<const std::byte> bytes);
    void append(std::string_view text);

    // Flushes, renames to the final name and syncs the folder. Nothing may be written after.
    void commit();

    const std::filesystem::path& final_path() const noexcept { return final_path_; }
    const std::filesystem::path& partial_path() const noexcept { return partial_path_; }
    bool committed() const noexcept { return committed_; }

private:
    [[noreturn]] void fail(int error_number, const char* action);
    [[noreturn]] void rethrow_failure() const;
    [[noreturn]] void busy();
    void remove_own_partial() noexcept;  // only while the name is still the open file (not another run's)

    std::filesystem::path final_path_;
    std::filesystem::path partial_path_;
    int fd_ = -1;
    int fault_slot_ = -1;  // the partial's remove_on_fault() slot (fault_handler.hpp) while it exists
    std::uint64_t append_offset_ = 0;
    bool committed_ = false;
    bool may_replace_ = false;  // the final name existed when this file was begun
    Durability durability_ = Durability::synced_on_commit;
    // The first failure; writes from other threads after it report the same error. The
    // descriptor stays open until destruction so no thread ever writes to a reused number.
    std::atomic<bool> failed_{false};
    mutable std::mutex failure_mutex_;
    std::unique_ptr<Error> failure_;
};

// fsync of a folder, so the renames inside it are durable (best effort: errors are ignored).
MOEQUANT_API void sync_folder(const std::filesystem::path& dir) noexcept;

// Writes a whole small file (JSON, a copied config) through an OutputFile.
MOEQUANT_API void write_file_atomically(const std::filesystem::path& path, std::string_view content);

// Copies a small side file (config.json, tokenizer.json) through an OutputFile. The source must
// be a regular file of at most tokenizer_file_limit bytes (input_file.hpp), else Error(input).
MOEQUANT_API void copy_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace moequant
