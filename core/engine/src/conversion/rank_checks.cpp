#include <moequant/engine/rank_checks.hpp>

#include "cluster/wire.hpp"

#include <moequant/blas_kernels.hpp>
#include <moequant/compute_dtype.hpp>
#include <moequant/cpu_isa.hpp>
#include <moequant/digest.hpp>
#include <moequant/matrix_products.hpp>
#include <moequant/version.hpp>
#include <moequant/output_file.hpp>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

namespace moequant {

namespace fs = std::filesystem;

namespace {

constexpr const char* probe_name = ".moequant-ranks";

std::string rank_and_host(int rank, const std::string& host) { return "rank " + std::to_string(rank) + " (" + host + ")"; }

// A digest of a few windows of a shard's bytes, spread over it: a fine-tune of the same model
// has the same headers but other weights, and reading a few windows costs nothing next to a
// run. (A whole-file digest would read terabytes.)
std::string sampled_digest(const fs::path& file, std::uint64_t size) {
    constexpr std::uint64_t window = 64 * 1024, windows = 4;
    Digest64 d;
    std::ifstream in(file, std::ios::binary);
    std::string buffer(window, '\0');
    for (std::uint64_t i = 0; i < windows && in; ++i) {
        const std::uint64_t at = size > window ? (size - window) * i / (windows - 1) : 0;
        in.seekg(static_cast<std::streamoff>(at));
        in.read(buffer.data(), static_cast<std::streamsize>(std::min(window, size)));
        d.update(std::string_view(buffer.data(), static_cast<std::size_t>(in.gcount())));
    }
    return d.hex();
}

// What identifies the source: config and shard names (the fingerprint), each shard's size,
// header and sampled bytes. Modification times are left out: a copy of the checkpoint on each
// node's own disk is the same source.
std::string source_identity(const RunManifest& job, const Checkpoint& source) {
    std::string id = job.source_fingerprint;
    for (const auto& s : job.source_shards)
        id += "\n" + s.name + ":" + std::to_string(s.bytes) + ":" + s.header_digest + ":" +
              sampled_digest(source.directory() / s.name, s.bytes);
    return id;
}

std::string job_identity(const RunManifest& job) {
    // The build too: ranks exchange the engine's own encodings.
    std::string id = std::string(MOEQUANT_VERSION_STRING) + "\n" + job.command + "\n" + job.plan_digest;
    bool calibrating = false;
    for (const auto& [k, v] : job.settings) {
        id += "\n" + k + "=" + v;
        calibrating = calibrating || k == "calibration";
    }
    // Float products may sum in another order on another CPU's kernels (AMX and AVX512-BF16 in
    // oneDNN, AVX-512 and AVX2 in moequant's own, BLIS's kernel sets, which also run GPTQ's
    // solve): calibration on a mixed cluster is refused.
    if (calibrating)
        id += "\nkernels=" + (compute_dtype() == ComputeDtype::bf16 ? bf16_product_isa() : std::string(isa_name(active_isa()))) +
              ", " + f32_gemm_kernels() + ", " + blas_kernels();
    return id;
}

// The first setting whose value differs between two identities' settings, for the message.
std::string first_difference(const std::string& mine, const std::string& root) {
    std::istringstream a(mine), b(root);
    std::string la, lb;
    while (true) {
        const bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
        if (!ga && !gb) return "";
        if (la != lb || ga != gb) return (ga ? "'" + la + "'" : "nothing") + " where rank 0 has " + (gb ? "'" + lb + "'" : "nothing");
    }
}

}  // namespace

void check_same_job_on_every_rank(Cluster& cluster, const std::function<RunManifest()>& describe_job, const Checkpoint& source) {
    if (cluster.size() == 1) return;
    const RunManifest job = describe_job();
    detail::WireWriter w;
    w.text(host_name());
    w.text(source_identity(job, source));
    w.text(job_identity(job));
    const std::vector<std::string> all = cluster.all_gather(w.take());
    std::string root_source, root_job;
    for (std::size_t r = 0; r < all.size(); ++r) {
        detail::WireReader in(all[r]);
        const std::string host = in.text(), source = in.text(), settings = in.text();
        if (r == 0) {
            root_source = source, root_job = settings;
            continue;
        }
        const std::string who = rank_and_host(static_cast<int>(r), host);
        if (source != root_source)
            cluster.fail_together(Error(ErrorKind::input,
                                              who + " sees another source checkpoint than rank 0 (config.json, shard names, sizes, "
                                                    "headers or sampled bytes differ)",
                                              {.code = "RankSourceDiffers",
                                               .hint = "every rank must read the same checkpoint: a shared filesystem, or identical copies"}));
        if (settings != root_job)
            cluster.fail_together(Error(ErrorKind::usage, who + " runs another job than rank 0: " + first_difference(settings, root_job),
                                              {.code = "RankJobDiffers",
                                               .hint = "give every rank the same build and command line; calibration needs nodes of one CPU kind"}));
    }
}

void check_output_shared(Cluster& cluster, const fs::path& output) {
    if (cluster.size() == 1) return;
    const fs::path probe = output / probe_name;
    std::string token;
    if (cluster.root()) {
        Digest64 d;
        d.update(host_name() + ":" + std::to_string(::getpid()) + ":" +
                 std::to_string(std::chrono::system_clock::now().time_since_epoch().count()));
        token = d.hex();
        write_file_atomically(probe, token);
    }
    cluster.broadcast(token, 0);
    std::string seen = "ok";
    if (!cluster.root()) {
        std::ifstream in(probe, std::ios::binary);
        std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!in && content.empty()) seen = "it does not see " + probe.string();
        else if (content != token) seen = "its " + probe.string() + " is not the one rank 0 wrote";
    }
    detail::WireWriter w;
    w.text(host_name());
    w.text(seen);
    const std::vector<std::string> all = cluster.all_gather(w.take());
    if (cluster.root()) {
        std::error_code ec;
        fs::remove(probe, ec);
    }
    for (std::size_t r = 1; r < all.size(); ++r) {
        detail::WireReader in(all[r]);
        const std::string host = in.text(), what = in.text();
        if (what == "ok") continue;
        cluster.fail_together(Error(ErrorKind::io,
                                          rank_and_host(static_cast<int>(r), host) +
                                              " does not share the output folder rank 0 locked: " + what,
                                          {.file = output.string(),
                                           .code = "OutputNotShared",
                                           .hint = "the output folder must be on a filesystem every rank mounts at the same path"}));
    }
}

}  // namespace moequant
