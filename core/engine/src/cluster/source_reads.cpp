#include <moequant/engine/source_reads.hpp>

#include "cluster/wire.hpp"

#include <moequant/digest.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>
#include <moequant/printable.hpp>

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>

namespace moequant {

namespace {

// The N of "<...>.layers.N.<...>", or -1.
std::int64_t layer_index(const std::string& name) {
    const std::size_t at = name.find(".layers.");
    if (at == std::string::npos && !name.starts_with("layers.")) return -1;
    std::size_t i = at == std::string::npos ? 7 : at + 8;
    std::int64_t n = -1;
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) n = (n < 0 ? 0 : n * 10) + (name[i] - '0');
    return i < name.size() && name[i] == '.' ? n : -1;
}

std::atomic<std::uint64_t> digested_bytes{0}, digest_nanoseconds{0};

// Adds the time since `start` (and `bytes`) to the tally when it goes out of scope.
struct Tally {
    std::uint64_t bytes = 0;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Tally() {
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
        digest_nanoseconds += static_cast<std::uint64_t>(ns);
        digested_bytes += bytes;
    }
};

}  // namespace

DigestCost digest_cost() noexcept { return {digested_bytes.load(), static_cast<double>(digest_nanoseconds.load()) * 1e-9}; }

void add_digest_cost(std::uint64_t bytes, double seconds) noexcept {
    digested_bytes += bytes;
    digest_nanoseconds += static_cast<std::uint64_t>(seconds * 1e9);
}

std::vector<std::string> expert_tensors(const Checkpoint& source, const MoeLayerPlan& layer) {
    std::set<std::string> names;
    for (const auto& e : layer.experts)
        for (const auto& w : e.weights)
            for (const auto& [role, tensor] : source.weight(w.tensor).tensors) names.insert(tensor);
    return {names.begin(), names.end()};
}

std::vector<std::string> forward_tensors(const ModelPlan& plan, std::int64_t after, std::int64_t through, bool model_wide) {
    std::vector<std::string> out;
    for (const auto& [name, role] : plan.roles) {
        const std::int64_t l = layer_index(name);
        if (l < 0 ? model_wide : (l > after && l <= through && l < plan.num_hidden_layers)) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<TensorDigest> tensor_digests(const Checkpoint& source, const std::vector<std::string>& tensors) {
    Tally tally;
    for (const auto& t : tensors) tally.bytes += source.info(t).size_bytes();
    std::vector<TensorDigest> out(tensors.size());
    parallel_for(0, tensors.size(), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t i = first; i < last; ++i) {
            const TensorView v = source.view(tensors[i]);
            char hex[17];
            std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(v.data(), v.size_bytes())));
            out[i] = {tensors[i], hex};
        }
    });
    return out;
}

std::string combined_digest(const std::vector<TensorDigest>& digests) {
    Digest64 d;
    for (const auto& t : digests) {
        d.update(t.tensor);
        d.update(std::string_view("\n"));
        d.update(t.digest);
    }
    return d.hex();
}

void check_read_alike_on_every_rank(Cluster& cluster, const Checkpoint& source, const std::vector<TensorDigest>& mine) {
    if (cluster.size() == 1) return;
    detail::WireWriter w;
    w.text(host_name());
    w.u64(mine.size());
    for (const auto& t : mine) {
        w.text(t.tensor);
        w.text(t.digest);
    }
    // Rank 0 gathers every rank's list, then finds the first difference against its own copy.
    std::string verdict;
    std::map<std::string, std::string> own;
    for (const auto& t : mine) own.emplace(t.tensor, t.digest);
    cluster.share(w.take(), [&](int rank, std::string_view bytes) {
        if (!cluster.root() || rank == 0 || !verdict.empty()) return;
        detail::WireReader in(bytes);
        const std::string host = in.text();
        std::vector<TensorDigest> theirs(in.count(2 * sizeof(std::uint64_t)));
        for (auto& t : theirs) t.tensor = in.text(), t.digest = in.text();
        std::vector<std::string> unread;
        for (const auto& t : theirs)
            if (!own.count(t.tensor) && source.contains(t.tensor)) unread.push_back(t.tensor);
        for (auto& t : tensor_digests(source, unread)) own.emplace(std::move(t.tensor), std::move(t.digest));
        for (const auto& t : theirs) {
            const auto at = own.find(t.tensor);
            if (at != own.end() && at->second == t.digest) continue;
            verdict = "rank " + std::to_string(rank) + " (" + host + ") read other bytes than rank 0 in tensor " +
                      printable_name(t.tensor) + (at == own.end() ? " (which rank 0's checkpoint has not)" : "") + "\n" +
                      (source.contains(t.tensor) ? (source.directory() / source.shard_of(t.tensor)).string() : std::string());
            return;
        }
    });
    cluster.broadcast(verdict, 0);
    if (verdict.empty()) return;
    const std::size_t newline = verdict.find('\n');
    cluster.fail_together(Error(ErrorKind::input, verdict.substr(0, newline),
                                {.file = verdict.substr(newline + 1),
                                 .code = "RankSourceDiffers",
                                 .hint = "every rank must read the same checkpoint: a shared filesystem, or identical copies"}));
}

void ForwardReadCheck::through_layer(std::int64_t layer, const std::vector<TensorDigest>& known) {
    if (cluster_.size() == 1 || layer <= checked_) return;
    std::set<std::string> taken;
    for (const auto& t : known) taken.insert(t.tensor);
    std::vector<std::string> rest;
    for (auto& name : forward_tensors(plan_, checked_, layer, checked_ < 0))
        if (!taken.count(name)) rest.push_back(std::move(name));
    checked_ = layer;
    std::vector<TensorDigest> digests = tensor_digests(source_, rest);
    digests.insert(digests.end(), known.begin(), known.end());
    check_read_alike_on_every_rank(cluster_, source_, digests);
}

}  // namespace moequant
