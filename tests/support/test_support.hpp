// Helpers shared by the test suites: temporary folders, file I/O, paths to shared/ data and
// running the moequant host as a child process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace moequant::test {

namespace fs = std::filesystem;

// shared/ (specs, golden data, fixtures): read-only.
fs::path shared_dir();
fs::path fixtures_dir();  // shared/fixtures/third_party
fs::path golden_dir();

// A fresh folder under the system temp dir, removed with everything in it on destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const fs::path& path() const { return path_; }
    fs::path operator/(const std::string& name) const { return path_ / name; }

private:
    fs::path path_;
};

// True when `part` occurs in `text` (an output, an error line).
bool contains(const std::string& text, const std::string& part);

std::vector<std::uint8_t> read_bytes(const fs::path& file);
std::string read_text(const fs::path& file);
void write_bytes(const fs::path& file, const std::vector<std::uint8_t>& bytes);
void write_text(const fs::path& file, const std::string& text);

// Builds the bytes of a safetensors file from a header text (no padding added) and data.
std::vector<std::uint8_t> safetensors_bytes(const std::string& header,
                                            const std::vector<std::uint8_t>& data,
                                            std::uint64_t length_prefix_override = UINT64_MAX);

struct CommandResult {
    int exit_code = -1;  // -signal when killed by a signal
    std::string out;
    std::string err;
    std::uint64_t peak_resident_bytes = 0;  // the child's ru_maxrss (wait4)
};

// Resource limits set in the child only (between fork and exec), never in the test process.
struct ChildLimits {
    std::optional<std::uint64_t> file_size;  // RLIMIT_FSIZE in bytes (ulimit -f)
    std::optional<fs::path> working_directory;  // the child's current folder (default: the test's)
};

// A program started without waiting for it (no shell), stdout and stderr captured. `env`
// entries ("NAME=value") are added to the inherited environment, replacing an inherited NAME.
// The destructor kills and reaps a child still running.
class Child {
public:
    Child(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
          const ChildLimits& limits = {});
    ~Child();
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    pid_t pid() const { return pid_; }
    // False once it has exited (it is then reaped; wait() returns its result).
    bool running();
    void kill(int signal);
    // Waits for it to end; exit code (or -signal), stdout and stderr.
    CommandResult wait();

private:
    pid_t pid_ = -1;
    int status_ = 0;
    std::uint64_t peak_resident_bytes_ = 0;
    bool reaped_ = false;
    int out_fd_ = -1, err_fd_ = -1;
};

// Runs a program to completion (see Child).
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env = {}, const ChildLimits& limits = {});

// The moequant host of this build. When `env` sets a fault variable (MOEQUANT_TEST_*), the test
// build of the host that reads them (moequant-fault-host); the release host ignores them.
fs::path host_executable(const std::vector<std::string>& env = {});

// Runs the host (as host_executable(env) picks it) with `args` (and extra environment entries,
// child limits).
CommandResult run_moequant(std::vector<std::string> args, const std::vector<std::string>& env = {},
                           const ChildLimits& limits = {});

// --dataset arguments of few short samples of the embedded text: a suite that calibrates stays
// at a few seconds.
extern const std::vector<std::string> small_calibration_dataset;
// Four rows of JSONL text no calibration run sees (plain text and a chat), for held-out measures.
extern const char* const held_out_jsonl;

// SHA-256 of a file, lowercase hex.
std::string sha256_file(const fs::path& file);

// Relative path -> SHA-256 of every regular file under `dir`, hidden ones included, except the
// run manifest (moequant-run.json) unless `with_manifest`.
std::map<std::string, std::string> file_hashes(const fs::path& dir, bool with_manifest = false);

// max |got - want| / max |want| over the elements: the relative error bounds of the forward
// tests (issue 7: 1e-4 for float32). The sizes must match.
double max_relative_error(const std::vector<float>& got, const std::vector<float>& want);

}  // namespace moequant::test
