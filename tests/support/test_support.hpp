// Helpers shared by the test suites: temporary folders, file I/O, paths to shared/ data and
// running the moequant host as a child process.
#pragma once

#include <cstdint>
#include <filesystem>
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
};

// Runs a program with arguments (no shell), capturing stdout and stderr. `env` entries
// ("NAME=value") are added to the inherited environment.
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env = {});

// The moequant host of this build.
fs::path host_executable();

// Runs the host with `args` (and extra environment entries).
CommandResult run_moequant(std::vector<std::string> args, const std::vector<std::string>& env = {});

// SHA-256 of a file, lowercase hex.
std::string sha256_file(const fs::path& file);

}  // namespace moequant::test
