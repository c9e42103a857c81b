// Whole-model conversion: `moequant convert` of a Qwen3-MoE-style checkpoint with 4 GB of BF16
// experts, to AMX INT4 and INT8 (kt's merged safetensors, and its .kt file tree: thousands of
// files made durable per layer) and to GGUF Q4_K_M and Q8_0, timed as a ratio to copying the
// same input bytes into a folder with fsync (measured in the same run), each with its CPU time
// (user + system: the figure other load on the machine disturbs least; wall / CPU shows time
// spent waiting on the disk), the others also as a ratio to the same run's INT4 time, and the
// peak RSS of the INT4 and GGUF conversions for that model and for one with twice the layers
// (bounded memory: the two should be within 10%).
// The model is complete enough for GGUF: attention, norms, embeddings, output head (together
// about 3% of the expert bytes) and a BPE tokenizer.json (synth's Qwen-style one).
// Usage: moequant_convert_model_bench [work-dir] [path-to-moequant]
// MOEQUANT_BENCH_EXPERTS=N sets the experts per layer (default 32: 4 GB; 4 for a quick check).
// The work dir needs about 16 GB free; it is removed at the end.

#include <moequant/safetensors_writer.hpp>
#include <moequant/sharded_writer.hpp>

#include "synth/synth_side_files.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace moequant;

namespace {

constexpr std::int64_t hidden = 4096, expert_size = 1024, vocab = 1024;
constexpr std::int64_t heads = 8, kv_heads = 2, head_dim = 128;  // attention: 2.5% of a layer's bytes
std::int64_t experts = 32;  // MOEQUANT_BENCH_EXPERTS

// A checkpoint of `layers` MoE layers, one shard per layer, random BF16 (about N(0, 0.02)) and
// norm gains of 1; the embeddings go with the first layer, the final norm and head with the last.
std::uint64_t write_model(const fs::path& dir, int layers) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    FILE* config = std::fopen((dir / "config.json").c_str(), "w");
    std::fprintf(config,
                 "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", \"hidden_size\": %lld, "
                 "\"intermediate_size\": %lld, \"moe_intermediate_size\": %lld, \"num_experts\": %lld, "
                 "\"num_experts_per_tok\": %lld, \"norm_topk_prob\": true, \"num_hidden_layers\": %d, "
                 "\"decoder_sparse_step\": 1, \"mlp_only_layers\": [], \"num_attention_heads\": %lld, "
                 "\"num_key_value_heads\": %lld, \"head_dim\": %lld, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, "
                 "\"max_position_embeddings\": 40960, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", "
                 "\"vocab_size\": %lld}\n",
                 static_cast<long long>(hidden), static_cast<long long>(expert_size * 2), static_cast<long long>(expert_size),
                 static_cast<long long>(experts), static_cast<long long>(std::min<std::int64_t>(8, experts)), layers,
                 static_cast<long long>(heads), static_cast<long long>(kv_heads), static_cast<long long>(head_dim),
                 static_cast<long long>(vocab));
    std::fclose(config);
    const adapters::SynthTokenizer tokenizer = adapters::qwen_style_tokenizer(vocab);
    for (const auto& [name, text] : {std::pair<const char*, const std::string&>{"tokenizer.json", tokenizer.tokenizer_json},
                                     {"tokenizer_config.json", tokenizer.tokenizer_config_json},
                                     {"special_tokens_map.json", tokenizer.special_tokens_map_json}})
        std::ofstream(dir / name, std::ios::binary) << text;

    ShardedSafetensorsWriter sharded(dir);
    std::vector<std::uint16_t> matrix(static_cast<std::size_t>(hidden * std::max(expert_size, vocab)));
    std::uint64_t state = 12345, bytes = 0;
    for (int l = 0; l < layers; ++l) {
        const std::string layer = "model.layers." + std::to_string(l) + ".";
        const std::string p = layer + "mlp.";
        std::vector<TensorSpec> specs;
        if (l == 0) specs.push_back({"model.embed_tokens.weight", DType::BF16, {vocab, hidden}});
        specs.push_back({layer + "input_layernorm.weight", DType::BF16, {hidden}});
        specs.push_back({layer + "post_attention_layernorm.weight", DType::BF16, {hidden}});
        specs.push_back({layer + "self_attn.q_proj.weight", DType::BF16, {heads * head_dim, hidden}});
        specs.push_back({layer + "self_attn.k_proj.weight", DType::BF16, {kv_heads * head_dim, hidden}});
        specs.push_back({layer + "self_attn.v_proj.weight", DType::BF16, {kv_heads * head_dim, hidden}});
        specs.push_back({layer + "self_attn.o_proj.weight", DType::BF16, {hidden, heads * head_dim}});
        specs.push_back({layer + "self_attn.q_norm.weight", DType::BF16, {head_dim}});
        specs.push_back({layer + "self_attn.k_norm.weight", DType::BF16, {head_dim}});
        specs.push_back({p + "gate.weight", DType::BF16, {experts, hidden}});
        for (std::int64_t e = 0; e < experts; ++e) {
            const std::string x = p + "experts." + std::to_string(e) + ".";
            specs.push_back({x + "gate_proj.weight", DType::BF16, {expert_size, hidden}});
            specs.push_back({x + "up_proj.weight", DType::BF16, {expert_size, hidden}});
            specs.push_back({x + "down_proj.weight", DType::BF16, {hidden, expert_size}});
        }
        if (l == layers - 1) {
            specs.push_back({"model.norm.weight", DType::BF16, {hidden}});
            specs.push_back({"lm_head.weight", DType::BF16, {vocab, hidden}});
        }
        SafetensorsWriter w = sharded.open_shard(shard_file_name(l + 1, layers), specs);
        for (const auto& s : specs) {
            std::size_t n = 1;
            for (const auto d : s.shape) n *= static_cast<std::size_t>(d);
            const bool norm = s.shape.size() == 1;
            for (std::size_t i = 0; i < n; ++i) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                matrix[i] = norm ? std::uint16_t{0x3F80}
                                 : static_cast<std::uint16_t>(0x3C00 + ((state >> 33) & 0x3FF) + (((state >> 60) & 1) << 15));
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
    double cpu_seconds = 0;  // user + system, all threads: what other load on the machine changes least
};

// `method` is an AMX one (int4, int8) or, with gguf, a llama-quantize preset (Q4_K_M, Q8_0);
// `format` is convert's --format (kt-safetensors, kt-tree, gguf).
Run run_convert(const std::string& exe, const fs::path& in, const fs::path& out, const char* method, const char* format) {
    fs::remove_all(out);
    ::sync();
    std::fflush(stdout);  // what was printed comes before the child's summary line
    const double start = now();
    pid_t pid = ::fork();
    if (pid == 0) {
        ::execl(exe.c_str(), exe.c_str(), "convert", "-i", in.c_str(), "-o", out.c_str(), "--format", format, "--quant-method",
                method, "--quiet", static_cast<char*>(nullptr));
        std::perror("exec");
        ::_exit(127);
    }
    int status = 0;
    struct rusage usage {};
    ::wait4(pid, &status, 0, &usage);
    auto seconds_of = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    Run r{now() - start, usage.ru_maxrss, seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime)};
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
    if (const char* n = std::getenv("MOEQUANT_BENCH_EXPERTS"); n && std::atoll(n) > 0) experts = std::atoll(n);
    fs::create_directories(work);
    const std::uint64_t bytes = write_model(work / "model", 5);
    std::printf("model: 5 MoE layers x %lld experts, %.2f GB of BF16 experts (+ attention, embeddings, head)\n",
                static_cast<long long>(experts), bytes / 1e9);

    const double copy = copy_with_fsync(work / "model", work / "copy");
    fs::remove_all(work / "copy");
    std::printf("reference: copy the input with fsync   %6.2f s (%.2f GB/s)\n", copy, bytes / copy / 1e9);
    struct Case {
        const char* format;
        const char* method;
    };
    const Case cases[] = {{"kt-safetensors", "int4"}, {"kt-safetensors", "int8"}, {"kt-tree", "int4"},
                          {"kt-tree", "int8"},        {"gguf", "Q4_K_M"},         {"gguf", "Q8_0"}};
    Run int4, q4km, q80;
    for (const Case& c : cases) {
        Run r = run_convert(exe, work / "model", work / "out", c.method, c.format);
        fs::remove_all(work / "out");
        std::printf("convert %-14s %-6s %7.2f s = %5.2f x the copy, %.2f GB/s of input, peak RSS %.0f MiB, CPU %.2f s "
                    "(wall / CPU %.2f)",
                    c.format, c.method, r.seconds, r.seconds / copy, bytes / r.seconds / 1e9, r.peak_rss_kib / 1024.0,
                    r.cpu_seconds, r.seconds / r.cpu_seconds);
        if (int4.seconds > 0)  // kt-safetensors int4 runs first
            std::printf(", %.2f x the int4 time (CPU %.2f x)", r.seconds / int4.seconds, r.cpu_seconds / int4.cpu_seconds);
        std::printf("\n");
        const std::string f = c.format, m = c.method;
        if (f == "kt-safetensors" && m == "int4") int4 = r;
        if (m == "Q4_K_M") q4km = r;
        if (m == "Q8_0") q80 = r;
    }
    write_model(work / "model", 10);
    std::printf("twice the layers (10):\n");
    for (const auto& [c, r5] :
         {std::pair<Case, Run>{{"kt-safetensors", "int4"}, int4}, {{"gguf", "Q4_K_M"}, q4km}, {{"gguf", "Q8_0"}, q80}}) {
        Run r10 = run_convert(exe, work / "model", work / "out", c.method, c.format);
        fs::remove_all(work / "out");
        std::printf("  %-14s %-6s peak RSS %.0f MiB = %.2f x the 5-layer run (%.2f s = %.2f x)\n", c.format, c.method,
                    r10.peak_rss_kib / 1024.0, static_cast<double>(r10.peak_rss_kib) / static_cast<double>(r5.peak_rss_kib),
                    r10.seconds, r10.seconds / r5.seconds);
    }
    fs::remove_all(work);
    return 0;
}
