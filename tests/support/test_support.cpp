#include "test_support.hpp"

#include <cmath>
#include <limits>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace moequant::test {

fs::path shared_dir() { return fs::path(MOEQUANT_SHARED_DIR); }
fs::path fixtures_dir() { return shared_dir() / "fixtures" / "third_party"; }
fs::path golden_dir() { return shared_dir() / "golden"; }
fs::path host_executable(const std::vector<std::string>& env) {
    const bool injects_faults = std::ranges::any_of(env, [](const std::string& e) { return e.starts_with("MOEQUANT_TEST_"); });
    return fs::path(injects_faults ? MOEQUANT_FAULT_HOST_EXE : MOEQUANT_HOST_EXE);
}

TempDir::TempDir() {
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
        auto candidate = fs::temp_directory_path() /
                         ("moequant-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
        std::error_code ec;
        if (fs::create_directory(candidate, ec)) {
            path_ = candidate;
            return;
        }
    }
    throw std::runtime_error("cannot create a temporary folder");
}

TempDir::~TempDir() {
    std::error_code ec;
    // Make read-only test folders removable again.
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator(); ++it)
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::uint8_t> read_bytes(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + file.string());
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string read_text(const fs::path& file) {
    auto bytes = read_bytes(file);
    return {bytes.begin(), bytes.end()};
}

void write_bytes(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + file.string());
}

void write_text(const fs::path& file, const std::string& text) {
    write_bytes(file, std::vector<std::uint8_t>(text.begin(), text.end()));
}

std::vector<std::uint8_t> safetensors_bytes(const std::string& header,
                                            const std::vector<std::uint8_t>& data,
                                            std::uint64_t length_prefix_override) {
    std::uint64_t n = length_prefix_override == UINT64_MAX ? header.size() : length_prefix_override;
    std::vector<std::uint8_t> out;
    out.reserve(8 + header.size() + data.size());
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
    for (char c : header) out.push_back(static_cast<std::uint8_t>(c));
    for (std::uint8_t b : data) out.push_back(b);
    return out;
}

namespace {

std::string slurp_fd(int fd) {
    std::string s;
    ::lseek(fd, 0, SEEK_SET);
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<std::size_t>(n));
    return s;
}

}  // namespace

Child::Child(const std::vector<std::string>& argv, const std::vector<std::string>& env, const ChildLimits& limits) {
    // Output goes to unlinked temp files rather than pipes, so a chatty child cannot block.
    char out_name[] = "/tmp/moequant-test-out-XXXXXX";
    char err_name[] = "/tmp/moequant-test-err-XXXXXX";
    out_fd_ = ::mkstemp(out_name);
    err_fd_ = ::mkstemp(err_name);
    if (out_fd_ < 0 || err_fd_ < 0) throw std::runtime_error("mkstemp failed");
    ::unlink(out_name);
    ::unlink(err_name);

    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
    for (const auto& e : env) {  // an added NAME=value replaces the inherited NAME
        const std::string name = e.substr(0, e.find('=') + 1);
        std::erase_if(env_strings, [&](const std::string& have) { return have.starts_with(name); });
        env_strings.push_back(e);
    }
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);

    if (!limits.file_size) {
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, out_fd_, 1);
        posix_spawn_file_actions_adddup2(&actions, err_fd_, 2);
        if (limits.working_directory) posix_spawn_file_actions_addchdir_np(&actions, limits.working_directory->c_str());
        int rc = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
        posix_spawn_file_actions_destroy(&actions);
        if (rc != 0) {
            ::close(out_fd_);
            ::close(err_fd_);
            throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
        }
        return;
    }
    // posix_spawn cannot set limits: fork, and only async-signal-safe calls before exec.
    const rlimit fsize{static_cast<rlim_t>(*limits.file_size), static_cast<rlim_t>(*limits.file_size)};
    pid_ = ::fork();
    if (pid_ < 0) {
        const int error = errno;
        ::close(out_fd_);
        ::close(err_fd_);
        throw std::runtime_error(std::string("fork failed: ") + std::strerror(error));
    }
    if (pid_ == 0) {
        if (::dup2(out_fd_, 1) < 0 || ::dup2(err_fd_, 2) < 0 || ::setrlimit(RLIMIT_FSIZE, &fsize) != 0) ::_exit(127);
        if (limits.working_directory && ::chdir(limits.working_directory->c_str()) != 0) ::_exit(127);
        ::execve(args[0], args.data(), envp.data());
        ::_exit(127);
    }
}

Child::~Child() {
    if (pid_ > 0 && !reaped_) {
        ::kill(pid_, SIGKILL);
        wait();
    }
    if (out_fd_ >= 0) ::close(out_fd_);
    if (err_fd_ >= 0) ::close(err_fd_);
}

bool Child::running() {
    if (reaped_) return false;
    struct rusage usage {};
    pid_t r = ::wait4(pid_, &status_, WNOHANG, &usage);
    if (r == pid_) {
        reaped_ = true;
        peak_resident_bytes_ = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
    }
    return !reaped_;
}

void Child::kill(int signal) {
    if (!reaped_) ::kill(pid_, signal);
}

CommandResult Child::wait() {
    while (!reaped_) {
        struct rusage usage {};
        if (::wait4(pid_, &status_, 0, &usage) == pid_) {
            reaped_ = true;
            peak_resident_bytes_ = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
        } else if (errno != EINTR) throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
    }
    CommandResult result;
    result.exit_code = WIFEXITED(status_) ? WEXITSTATUS(status_) : -WTERMSIG(status_);
    result.out = slurp_fd(out_fd_);
    result.err = slurp_fd(err_fd_);
    result.peak_resident_bytes = peak_resident_bytes_;
    return result;
}

CommandResult run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const ChildLimits& limits) {
    return Child(argv, env, limits).wait();
}

CommandResult run_moequant(std::vector<std::string> args, const std::vector<std::string>& env, const ChildLimits& limits) {
    args.insert(args.begin(), host_executable(env).string());
    return run_command(args, env, limits);
}

const std::vector<std::string> small_calibration_dataset = {"--dataset", "embedded", "--num_calibration_samples", "4",
                                                             "--max_sequence_length", "48"};

const char* const held_out_jsonl =
    "{\"text\": \"A lighthouse keeper counts the ships that pass at night and writes their names in a book.\"}\n"
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Which road leads to the market?\"}, "
    "{\"role\": \"assistant\", \"content\": \"Take the second bridge, then follow the river.\"}]}\n"
    "{\"text\": \"Seven bakers share one oven; each knows the hour when the bread must come out.\"}\n"
    "{\"text\": \"The numbers 12, 345 and 6789 were painted on the doors of the old warehouse.\"}\n";

std::string sha256_file(const fs::path& file) {
    auto r = run_command({"/usr/bin/sha256sum", file.string()});
    if (r.exit_code != 0) throw std::runtime_error("sha256sum failed for " + file.string());
    return r.out.substr(0, 64);
}

std::map<std::string, std::string> file_hashes(const fs::path& dir, bool with_manifest) {
    std::vector<std::string> argv = {"/usr/bin/sha256sum", "--"};
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file() && (with_manifest || e.path().filename() != "moequant-run.json")) {
            names.push_back(fs::relative(e.path(), dir).string());
            argv.push_back(e.path().string());
        }
    std::map<std::string, std::string> out;
    if (names.empty()) return out;
    // One sha256sum for all files: its lines come in argument order.
    auto r = run_command(argv);
    if (r.exit_code != 0) throw std::runtime_error("sha256sum failed under " + dir.string() + ": " + r.err);
    std::istringstream lines(r.out);
    std::string line;
    for (const auto& name : names) {
        if (!std::getline(lines, line) || line.size() < 64) throw std::runtime_error("unexpected sha256sum output");
        out[name] = line.substr(0, 64);
    }
    return out;
}

double max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
        scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    }
    return diff / scale;
}

}  // namespace moequant::test
