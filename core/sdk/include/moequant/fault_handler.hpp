// Turning a fault on a memory-mapped input into a clear error. Inputs are mapped, so a file
// that shrinks while it is read (truncated by another process, a vanished network mount) kills
// the process with SIGBUS. With the handler installed, a SIGBUS inside a mapped input prints
//   moequant: error: <file>: the file shrank or became unreadable while being read (FileTruncated)
// and exits with code 3 (invalid input); any other SIGBUS keeps its default action. Outputs are
// written under temporary names, so dying here leaves nothing that looks complete.
#pragma once

#include <moequant/export.hpp>

namespace moequant {

// Installs the process-wide SIGBUS handler. For executables (the moequant host calls it first
// thing); a library user decides for itself whether it wants it.
MOEQUANT_API void install_mapped_file_fault_handler();

}  // namespace moequant
