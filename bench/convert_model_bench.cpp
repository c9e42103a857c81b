// Whole-model conversion: `moequant convert` of a Qwen3-MoE-style checkpoint with 4 GB of BF16
// experts, INT4 and INT8, timed as a ratio to copying the same input bytes into a folder with
// fsync (measured in the same run), and the peak RSS of the conversion for that model and for
// one with twice the layers (bounded memory: the two should be within 10%).
// Usage: moequant_convert_model_bench [work-dir] [path-to-moequant]
// The work dir needs about 16 GB free; it is removed at the end.

#include <moequant/safetensors_writer.hpp>
#include <moequant/sharded_writer.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace moequant;

namespace {

constexpr std::int64_t hidden = 4096, expert_size = 1024, experts = 32;

// A checkpoint of `layers` MoE layers, one shard per layer, random BF16 (about N(0, 0.02)).
std::uint64_t write_model(const fs::path& dir, int layers) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    FILE* config = std::fopen((dir / "config.json").c_str(), "w");
    std::fprintf(config,
                 "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", \"hidden_size\": %lld, "
                 "\"moe_intermediate_size\": %lld, \"num_experts\": %lld, \"num_experts_per_tok\": 8, "
                 "\"num_hidden_layers\": %d, \"decoder_sparse_step\": 1, \"mlp_only_layers\": [], \"vocab_size\": 1024}\n",
                 static_cast<long long>(hidden), static_cast<long long>(expert_size), static_cast<long long>(experts), layers);
    std::fclose(config);
    ShardedSafetensorsWriter sharded(dir);
    std::vector<std::uint16_t> matrix(static_cast<std::size_t>(hidden * expert_size));
    std::uint64_t state = 12345, bytes = 0;
    for (int l = 0; l < layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".mlp.";
        std::vector<TensorSpec> specs = {{p + "gate.weight", DType::BF16, {experts, hidden}}};
        for (std::int64_t e = 0; e < experts; ++e) {
            const std::string x = p + "experts." + std::to_string(e) + ".";
            specs.push_back({x + "gate_proj.weight", DType::BF16, {expert_size, hidden}});
            specs.push_back({x + "up_proj.weight", DType::BF16, {expert_size, hidden}});
            specs.push_back({x + "down_proj.weight", DType::BF16, {hidden, expert_size}});
        }
        SafetensorsWriter w = sharded.open_shard(shard_file_name(l + 1, layers), specs);
        for (const auto& s : specs) {
            const std::size_t n = static_cast<std::size_t>(s.shape[0] * s.shape[1]);
            for (std::size_t i = 0; i < n; ++i) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                matrix[i] = static_cast<std::uint16_t>(0x3C00 + ((state >> 33) & 0x3FF) + (((state >> 60) & 1) << 15));
            }
            w.write(s.name, std::as_bytes(std::span<const std::uint16_t>(matrix.data(), n)));
            if (s.name.find(".experts.") != std::string::npos) bytes += n * 2;
        }
        w.finish();
    }
    sharded.write_index();
    ::sync();  // the model's own writeback must not compete with what is measured next
    return bytes;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The reference: copy every shard into `to` and fdatasync each file.
double copy_with_fsync(const fs::path& from, const fs::path& to) {
    fs::remove_all(to);
    fs::create_directories(to);
    ::sync();
    std::vector<char> buffer(8u << 20);
    const double start = now();
    for (const auto& e : fs::directory_iterator(from)) {
        int in = ::open(e.path().c_str(), O_RDONLY);
        int out = ::open((to / e.path().filename()).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ssize_t n;
        while ((n = ::read(in, buffer.data(), buffer.size())) > 0)
            if (::write(out, buffer.data(), static_cast<std::size_t>(n)) != n) std::perror("copy");
        ::fdatasync(out);
        ::close(in);
        ::close(out);
    }
    return now() - start;
}

struct Run {
    double seconds = 0;
    long peak_rss_kib = 0;
};

Run run_convert(const std::string& exe, const fs::path& in, const fs::path& out, const char* method) {
    fs::remove_all(out);
    ::sync();
    const double start = now();
    pid_t pid = ::fork();
    if (pid == 0) {
        ::execl(exe.c_str(), exe.c_str(), "convert", "-i", in.c_str(), "-o", out.c_str(), "--quant-method", method, "--quiet",
                static_cast<char*>(nullptr));
        std::perror("exec");
        ::_exit(127);
    }
    int status = 0;
    struct rusage usage {};
    ::wait4(pid, &status, 0, &usage);
    Run r{now() - start, usage.ru_maxrss};
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "moequant convert failed (status %d)\n", status);
        std::exit(1);
    }
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    const fs::path work = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / "moequant-convert-bench";
    const std::string exe = argc > 2 ? argv[2] : (fs::canonical("/proc/self/exe").parent_path() / "moequant").string();
    fs::create_directories(work);
    const std::uint64_t bytes = write_model(work / "model", 5);
    std::printf("model: 5 MoE layers x %lld experts, %.2f GB of BF16 experts\n", static_cast<long long>(experts), bytes / 1e9);

    const double copy = copy_with_fsync(work / "model", work / "copy");
    fs::remove_all(work / "copy");
    std::printf("reference: copy the input with fsync   %6.2f s (%.2f GB/s)\n", copy, bytes / copy / 1e9);
    long rss5 = 0;
    for (const char* method : {"int4", "int8"}) {
        Run r = run_convert(exe, work / "model", work / "out", method);
        fs::remove_all(work / "out");
        std::printf("convert --quant-method %s          %6.2f s = %.2f x the copy, %.2f GB/s of input, peak RSS %.0f MiB\n",
                    method, r.seconds, r.seconds / copy, bytes / r.seconds / 1e9, r.peak_rss_kib / 1024.0);
        if (std::string(method) == "int4") rss5 = r.peak_rss_kib;
    }
    write_model(work / "model", 10);
    Run r10 = run_convert(exe, work / "model", work / "out", "int4");
    std::printf("twice the layers (10), int4: peak RSS %.0f MiB = %.2f x the 5-layer run\n", r10.peak_rss_kib / 1024.0,
                static_cast<double>(r10.peak_rss_kib) / static_cast<double>(rss5));
    fs::remove_all(work);
    return 0;
}
