// How long `inspect` takes on a DeepSeek-V3-sized checkpoint: 163 shards, ~92,000 tensors,
// ~690 GB of FP8 experts. The shards are sparse files (real headers, data left as holes), so
// the benchmark needs almost no disk. Two references are measured in the same run:
//   - reading the same header bytes with pread (the least any header-only tool must do);
//   - the same checkpoint with 1/1000 of the data (same tensor count): if inspect reads only
//     headers, the two times match.
// Usage: moequant_inspect_bench [work-dir] [path-to-moequant]
//   with the host's path, the full CLI (`moequant inspect --json`) is timed too.

#include "bench_timing.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/safetensors_writer.hpp>
#include <moequant/sharded_writer.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace fs = std::filesystem;
using namespace moequant;
using moequant::bench::best_seconds;

namespace {

constexpr int shards = 163;
constexpr int layers = 61, first_dense = 3, experts = 256;

struct Built {
    std::uint64_t tensors = 0, header_bytes = 0, data_bytes = 0;
};

// Tensor list of a DeepSeek-V3-like model (experts, scales, attention, norms); `scale`
// divides the big dimensions so the data shrinks while names and counts stay the same.
std::vector<TensorSpec> model_tensors(std::int64_t scale) {
    std::vector<TensorSpec> t;
    auto fp8 = [&](const std::string& name, std::int64_t out, std::int64_t in) {
        out = std::max<std::int64_t>(1, out / scale);
        t.push_back({name, DType::F8_E4M3, {out, in}});
        t.push_back({name + "_scale_inv", DType::F32, {(out + 127) / 128, (in + 127) / 128}});
    };
    for (int l = 0; l < layers; ++l) {
        std::string p = "model.layers." + std::to_string(l) + ".";
        t.push_back({p + "input_layernorm.weight", DType::BF16, {7168}});
        t.push_back({p + "post_attention_layernorm.weight", DType::BF16, {7168}});
        fp8(p + "self_attn.q_a_proj.weight", 1536, 7168);
        fp8(p + "self_attn.q_b_proj.weight", 24576, 1536);
        fp8(p + "self_attn.kv_a_proj_with_mqa.weight", 576, 7168);
        fp8(p + "self_attn.kv_b_proj.weight", 32768, 512);
        fp8(p + "self_attn.o_proj.weight", 7168, 16384);
        t.push_back({p + "self_attn.q_a_layernorm.weight", DType::BF16, {1536}});
        t.push_back({p + "self_attn.kv_a_layernorm.weight", DType::BF16, {512}});
        if (l < first_dense) {
            fp8(p + "mlp.gate_proj.weight", 18432, 7168);
            fp8(p + "mlp.up_proj.weight", 18432, 7168);
            fp8(p + "mlp.down_proj.weight", 7168, 18432);
            continue;
        }
        t.push_back({p + "mlp.gate.weight", DType::BF16, {256, 7168}});
        t.push_back({p + "mlp.gate.e_score_correction_bias", DType::F32, {256}});
        for (int e = 0; e < experts; ++e) {
            std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
            fp8(ep + "gate_proj.weight", 2048, 7168);
            fp8(ep + "up_proj.weight", 2048, 7168);
            fp8(ep + "down_proj.weight", 7168, 2048);
        }
        fp8(p + "mlp.shared_experts.gate_proj.weight", 2048, 7168);
        fp8(p + "mlp.shared_experts.up_proj.weight", 2048, 7168);
        fp8(p + "mlp.shared_experts.down_proj.weight", 7168, 2048);
    }
    t.push_back({"model.embed_tokens.weight", DType::BF16, {129280 / scale, 7168}});
    t.push_back({"model.norm.weight", DType::BF16, {7168}});
    t.push_back({"lm_head.weight", DType::BF16, {129280 / scale, 7168}});
    return t;
}

// Writes real headers and leaves each shard's data as a hole (ftruncate), plus the index.
Built build_checkpoint(const fs::path& dir, std::int64_t scale) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto tensors = model_tensors(scale);
    Built b;
    b.tensors = tensors.size();
    std::map<std::string, std::string> weight_map;
    std::size_t per_shard = (tensors.size() + shards - 1) / shards;
    for (int s = 0; s < shards; ++s) {
        std::size_t begin = s * per_shard, end = std::min(tensors.size(), begin + per_shard);
        std::vector<TensorSpec> part(tensors.begin() + begin, tensors.begin() + end);
        std::string name = "model-" + std::string(5 - std::to_string(s + 1).size(), '0') + std::to_string(s + 1) +
                           "-of-000163.safetensors";
        for (const auto& t : part) weight_map[t.name] = name;
        auto [header, layout] = plan_safetensors_layout(part, default_safetensors_metadata());
        std::uint64_t data = layout.empty() ? 0 : layout.back().end;
        b.header_bytes += header.size();
        b.data_bytes += data;
        int fd = ::open((dir / name).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        std::uint64_t n = header.size();
        unsigned char prefix[8];
        for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(n >> (8 * i));
        if (::write(fd, prefix, 8) != 8 || ::write(fd, header.data(), n) != static_cast<ssize_t>(n) ||
            ::ftruncate(fd, static_cast<off_t>(8 + n + data)) != 0) {
            std::perror("writing a shard");
            std::exit(1);
        }
        ::close(fd);
    }
    std::string index = "{\"metadata\":{\"total_size\":" + std::to_string(b.data_bytes) + "},\"weight_map\":{";
    bool first = true;
    for (const auto& [t, s] : weight_map) {
        index += (first ? "\"" : ",\"") + t + "\":\"" + s + "\"";
        first = false;
    }
    index += "}}";
    FILE* f = std::fopen((dir / "model.safetensors.index.json").c_str(), "w");
    std::fwrite(index.data(), 1, index.size(), f);
    std::fclose(f);
    return b;
}

// What `inspect` does: open through the index, validate every header both ways, sum up.
std::uint64_t inspect(const fs::path& dir) {
    Checkpoint c = Checkpoint::open(dir);
    c.validate_all();
    std::uint64_t bytes = 0;
    for (const auto& s : c.shard_names())
        for (const auto& t : c.shard(s).tensors()) bytes += t.size_bytes();
    return bytes;
}

// The least a header-only reader must do: read each shard's length prefix and header.
std::uint64_t read_headers(const fs::path& dir) {
    std::uint64_t total = 0;
    std::vector<char> buf;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() != ".safetensors") continue;
        int fd = ::open(entry.path().c_str(), O_RDONLY);
        std::uint64_t n = 0;
        if (::pread(fd, &n, 8, 0) != 8) std::exit(1);
        buf.resize(n);
        if (::pread(fd, buf.data(), n, 8) != static_cast<ssize_t>(n)) std::exit(1);
        total += n + static_cast<unsigned char>(buf[n / 2]);
        ::close(fd);
    }
    return total;
}

double run_cli(const std::string& exe, const fs::path& dir) {
    return best_seconds(3, [&] {
        pid_t pid;
        std::string path = dir.string();
        const char* argv[] = {exe.c_str(), "inspect", "--json", "--no-default-plugins", path.c_str(), nullptr};
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        if (posix_spawn(&pid, exe.c_str(), &fa, nullptr, const_cast<char**>(argv), environ) != 0) std::exit(1);
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            std::fprintf(stderr, "moequant inspect failed\n");
            std::exit(1);
        }
    });
}

}  // namespace

int main(int argc, char** argv) {
    fs::path work = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / "moequant-inspect-bench";
    std::string exe = argc > 2 ? argv[2] : "";
    fs::path big = work / "full", small = work / "thousandth";
    Built b = build_checkpoint(big, 1);
    Built s = build_checkpoint(small, 1000);
    std::printf("checkpoint: %d shards, %llu tensors, %.1f MB of headers, %.1f GB of data (sparse files)\n", shards,
                static_cast<unsigned long long>(b.tensors), b.header_bytes / 1e6, b.data_bytes / 1e9);

    inspect(big);  // warm the page cache and the allocator
    double t_inspect = best_seconds(5, [&] { inspect(big); });
    double t_small = best_seconds(5, [&] { inspect(small); });
    double t_headers = best_seconds(5, [&] { read_headers(big); });
    std::printf("reference: pread of the header bytes          %8.1f ms  (%.0f MB/s)\n", t_headers * 1e3,
                b.header_bytes / t_headers / 1e6);
    std::printf("inspect (open index, validate all headers)    %8.1f ms  = %.1fx the header read, %.0f MB/s of headers\n",
                t_inspect * 1e3, t_inspect / t_headers, b.header_bytes / t_inspect / 1e6);
    std::printf("inspect with 1/1000 of the data (%.2f GB)     %8.1f ms  = %.2fx the full-size time\n",
                s.data_bytes / 1e9, t_small * 1e3, t_small / t_inspect);
    if (!exe.empty()) {
        double t_cli = run_cli(exe, big);
        std::printf("moequant inspect --json (whole process)       %8.1f ms  = %.1fx the header read\n", t_cli * 1e3,
                    t_cli / t_headers);
    }
    if (!std::getenv("MOEQUANT_BENCH_KEEP")) fs::remove_all(work);
    return 0;
}
