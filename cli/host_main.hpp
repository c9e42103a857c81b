// The whole `moequant` host behind main(): sets up signals, MPI and error reporting, runs the
// command line and returns the process exit code. The release executable's main() calls it, and
// so does the test build of the host (tests/support/fault_host_main.cpp).
#pragma once

namespace moequant::cli {

int host_main(int argc, char** argv);

}  // namespace moequant::cli
