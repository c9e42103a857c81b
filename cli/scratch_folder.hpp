// The scratch folder of a run that calibrates, records or evaluates: per-layer MoE inputs (and,
// under --max-memory, the hidden states) in files of its own, under $TMPDIR (else /tmp). Checked
// before any work, on every rank: a TMPDIR that is empty, missing, not a folder, not writable, or
// without room for what the run will put there is refused with one line (exit 5), never an
// internal error half-way (docs/safety.md).
#pragma once

#include <cstdint>
#include <filesystem>

namespace moequant::cli {

// A fresh folder (mkdtemp: 0700, a name nobody planted) under the checked temporary folder,
// removed with everything in it, also when a fault or SIGTERM/SIGINT/SIGHUP ends the run.
class ScratchFolder {
public:
    // `needed_bytes`: what the run will write there at most (the file system must have it free).
    explicit ScratchFolder(std::uint64_t needed_bytes);
    ~ScratchFolder();
    ScratchFolder(const ScratchFolder&) = delete;
    ScratchFolder& operator=(const ScratchFolder&) = delete;
    const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
    int fault_slot_ = -1;  // remove_on_fault() (fault_handler.hpp)
};

// What a run puts in its scratch folder at most, F32 rows of `hidden` values: one MoE layer's
// inputs for all `tokens` when it calibrates or records layer by layer, and `mapped_copies` x
// the hidden states when --max-memory maps them to a file (1 there, 2 for eval's two models).
std::uint64_t scratch_bytes(std::int64_t tokens, std::int64_t hidden, bool layer_inputs, int mapped_copies);

// The temporary folder scratch files go in: $TMPDIR when set, else /tmp; Error(io,
// "BadTmpdir") naming it when it is not a writable folder, Error(io, "NoScratchSpace") when
// its file system has less than `needed_bytes` free.
std::filesystem::path checked_temporary_folder(std::uint64_t needed_bytes);

}  // namespace moequant::cli
