// Turning a fault on a memory-mapped input into a clear error. Inputs are mapped, so a file
// that shrinks while it is read (truncated by another process, a vanished network mount) kills
// the process with SIGBUS. With the handler installed, a SIGBUS inside a mapped input prints
//   moequant: error: <file>: the file shrank or became unreadable while being read (FileTruncated)
// and exits with code 3 (invalid input); any other SIGBUS keeps its default action. Outputs are
// written under temporary names, so dying here leaves nothing that looks complete; and the paths
// registered with remove_on_fault() (the output folder's lock, temporary files and folders) are
// removed first, since no destructor runs; install_termination_cleanup() does the same for the
// signals that end a run from outside.
#pragma once

#include <moequant/export.hpp>

#include <filesystem>

namespace moequant {

// Installs the process-wide SIGBUS handler. For executables (the moequant host calls it first
// thing); a library user decides for itself whether it wants it.
MOEQUANT_API void install_mapped_file_fault_handler();

// Installs handlers for SIGTERM, SIGINT and SIGHUP (mpirun ending the other ranks after one
// failed, Ctrl-C, a closed terminal) that remove the paths registered below and then let the
// signal end the process as it would have. Call after anything that installs its own (MPI).
MOEQUANT_API void install_termination_cleanup();

// Registers a file or folder (with what is in it, a few levels deep) for the handlers to remove
// before they end the process. Returns a slot for forget_on_fault(), or -1 when every slot is
// taken or the path is too long (the path then stays behind, as after a kill). Thread-safe.
MOEQUANT_API int remove_on_fault(const std::filesystem::path& path) noexcept;
// Unregisters a slot remove_on_fault() returned (once its path is gone or kept); -1 is ignored.
MOEQUANT_API void forget_on_fault(int slot) noexcept;

}  // namespace moequant
