// The paths the SIGBUS and termination handlers remove before they end the process
// (fault_handler.hpp's remove_on_fault), private to the SDK: fixed slots, lock-free, so the
// handlers may read them.
#pragma once

namespace moequant::detail {

// Removes every registered path: a file by unlink(2), a folder with the files and folders in it
// (a few levels deep). Async-signal-safe: atomics and system calls only.
void remove_registered_paths() noexcept;

// Restores the default action of `signal` and raises it again (async-signal-safe): a handler's
// way of ending the process as if it had not been installed.
void raise_with_default_action(int signal) noexcept;

}  // namespace moequant::detail
