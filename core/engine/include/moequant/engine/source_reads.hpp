// What a run read of its source checkpoint, by content: the stored tensors a MoE layer's experts
// (or a whole decoder layer) are made of, their XXH3 digests, and the proof across MPI ranks
// that every rank read the bytes rank 0 read (docs/cluster.md). The digests are taken from the
// mapped pages the work has just read, before they are released: no second read from disk on
// the rank that used them.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/engine/cluster.hpp>
#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace moequant {

struct TensorDigest {
    std::string tensor;  // a stored tensor's name
    std::string digest;  // XXH3-64 (xxhash) hex of its bytes as stored: memory speed
};

// The stored tensors of a MoE layer's routed experts: every tensor of every expert weight's
// encoding (a weight, its scales, packed zero points), sorted, each once (a fused tensor once).
std::vector<std::string> expert_tensors(const Checkpoint& source, const MoeLayerPlan& layer);

// The stored tensors of decoder layers (after, through] (by the ".layers.N." of their names),
// and with `model_wide` those of no layer (embeddings, final norm, lm_head), sorted: what a
// forward through those layers reads. Tensors of the plan's MTP layers are never included.
std::vector<std::string> forward_tensors(const ModelPlan& plan, std::int64_t after, std::int64_t through,
                                                      bool model_wide);

// The digests of `tensors`, in their order (computed in parallel).
std::vector<TensorDigest> tensor_digests(const Checkpoint& source, const std::vector<std::string>& tensors);

// One digest of a list: the names and digests in their order.
std::string combined_digest(const std::vector<TensorDigest>& digests);

// Collective: every rank passes what it read (`mine`); rank 0 digests the same tensors of its
// own copy (reading those it has not read itself) and compares. Error(input, "RankSourceDiffers")
// on every rank when one rank's bytes differ, naming the rank, the shard file and the tensor.
// Nothing happens in a cluster of one.
void check_read_alike_on_every_rank(Cluster& cluster, const Checkpoint& source, const std::vector<TensorDigest>& mine);

// What this process spent so far on the digests above (and on eval's check of an output's
// recorded digests): bytes digested and seconds, for the benches' cost ratios.
struct DigestCost {
    std::uint64_t bytes = 0;
    double seconds = 0;
};
DigestCost digest_cost() noexcept;
// Adds work done elsewhere (a file digest) to the tally.
void add_digest_cost(std::uint64_t bytes, double seconds) noexcept;

// The forward's reads layer by layer (record, eval, sequential calibration): each call proves,
// across ranks, the tensors of the decoder layers since the last call (the model-wide ones with
// the first) that every rank read as rank 0 did. Nothing happens in a cluster of one.
class ForwardReadCheck {
public:
    ForwardReadCheck(Cluster& cluster, const Checkpoint& source, const ModelPlan& plan)
        : cluster_(cluster), source_(source), plan_(plan) {}
    // Collective: every rank calls it after the same layer. `known`: digests already taken of
    // some of those tensors (a conversion's of the layer's experts), not taken again.
    void through_layer(std::int64_t layer, const std::vector<TensorDigest>& known = {});

private:
    Cluster& cluster_;
    const Checkpoint& source_;
    const ModelPlan& plan_;
    std::int64_t checked_ = -1;  // decoder layers [0, checked_] are done
};

}  // namespace moequant
