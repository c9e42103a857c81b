#include "calibration/hidden_states.hpp"
#include "calibration/sample_batches.hpp"
#include "evaluation/token_scores.hpp"
#include "cluster/wire.hpp"

#include <moequant/engine/evaluation.hpp>
#include <moequant/engine/source_reads.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

namespace moequant {

namespace {

// Rows per logits() call: the logits of both models take rows x vocab floats each.
constexpr std::int64_t logit_rows = 32;

void add(std::span<float> x, std::span<const float> y) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

double squared_distance(std::span<const float> a, std::span<const float> b) {
    double sum = 0;
    for (std::size_t i = 0; i < a.size(); ++i) sum += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    return sum;
}

double squared_norm(const std::vector<float>& a) {
    double sum = 0;
    for (float v : a) sum += static_cast<double>(v) * v;
    return sum;
}

struct Samples {
    std::vector<std::int32_t> ids;  // back to back
    std::vector<std::int64_t> lengths, starts;
    std::int64_t tokens = 0;
};

Samples flatten(const std::vector<std::vector<std::int32_t>>& samples) {
    Samples s;
    for (const auto& sample : samples) {
        s.starts.push_back(s.tokens);
        s.lengths.push_back(static_cast<std::int64_t>(sample.size()));
        s.tokens += static_cast<std::int64_t>(sample.size());
        s.ids.insert(s.ids.end(), sample.begin(), sample.end());
    }
    return s;
}

// Every rank's per-block error sums (its blocks [first, last)) and routed-token counts, on every
// rank: the blocks' in their slots, the counts added up (integers: any order).
void share_layer_sums(Cluster& cluster, std::size_t first, std::size_t last, std::vector<double>& error,
                      std::vector<double>& energy, std::vector<std::int64_t>& routed) {
    if (cluster.size() == 1) return;
    detail::WireWriter w;
    w.u64(first);
    w.u64(last);
    for (std::size_t b = first; b < last; ++b) w.bytes(&error[b], sizeof(double)), w.bytes(&energy[b], sizeof(double));
    for (std::int64_t n : routed) w.i64(n);
    std::fill(routed.begin(), routed.end(), 0);
    cluster.share(w.take(), [&](int, std::string_view bytes) {
        detail::WireReader in(bytes);
        const std::size_t from = in.u64(), to = in.u64();
        for (std::size_t b = from; b < to && b < error.size(); ++b) in.bytes(&error[b], sizeof(double)), in.bytes(&energy[b], sizeof(double));
        for (std::int64_t& n : routed) n += in.i64();
    });
}

// Every rank's token scores in rank order (which is sample order) passed to `take`.
template <class Take>
void share_token_scores(Cluster& cluster, const std::vector<detail::TokenScore>& mine, const Take& take) {
    if (cluster.size() == 1) {
        for (const auto& t : mine) take(t);
        return;
    }
    detail::WireWriter w;
    w.u64(mine.size());
    for (const auto& t : mine) {
        w.bytes(&t.nll_source, sizeof(double));
        w.bytes(&t.nll_quantized, sizeof(double));
        w.bytes(&t.kl, sizeof(double));
        w.u64(t.top1_agrees ? 1 : 0);
    }
    cluster.share(w.take(), [&](int, std::string_view bytes) {
        detail::WireReader in(bytes);
        for (std::uint64_t n = in.u64(); n > 0; --n) {
            detail::TokenScore t{};
            in.bytes(&t.nll_source, sizeof(double));
            in.bytes(&t.nll_quantized, sizeof(double));
            in.bytes(&t.kl, sizeof(double));
            t.top1_agrees = in.u64() != 0;
            take(t);
        }
    });
}

}  // namespace

EvaluationReport run_evaluation(const EvaluationJob& job, ProgressSink& progress) {
    if (!job.forward || !job.source || !job.plan) throw Error(ErrorKind::internal, "incomplete evaluation job");
    const ModelPlan& plan = *job.plan;
    const Samples s = flatten(job.samples);
    if (s.tokens <= static_cast<std::int64_t>(s.lengths.size()))
        throw Error(ErrorKind::input, "no sample has two tokens: eval scores each token's successor", {.code = "BadDataset"});
    const std::int64_t h = plan.hidden_size;
    const bool two = job.quantized != nullptr;
    Cluster& cluster = job.cluster ? *job.cluster : Cluster::alone();
    // Fixed blocks of whole samples (as sequential calibration's), a contiguous run of them per
    // rank; a batch's quantized MoE call runs over both models' tokens at once (below): twice
    // the rows under a budget.
    const detail::RankBlocks blocks = detail::rank_blocks(
        s.lengths, detail::block_token_limit(job.max_memory / (two ? 4 : 2), h, s.tokens), cluster.rank(), cluster.size());
    const auto& batches = blocks.blocks;
    const std::size_t first_batch = blocks.first, last_batch = blocks.last;
    const std::int64_t first_token = blocks.first_token, local_tokens = blocks.tokens;
    // Under a budget: half for the hidden states (both models' share it), half for a batch's work.
    const std::uint64_t state_bytes = static_cast<std::uint64_t>(local_tokens * h) * sizeof(float);
    const bool mapped = job.max_memory > 0 && (two ? 2 : 1) * state_bytes > job.max_memory / 2;
    auto states = [&](const char* name) {
        return std::make_unique<detail::HiddenStates>(local_tokens, h, mapped ? job.scratch / name : std::filesystem::path());
    };
    const auto xs = states("source.f32");
    const auto xq = two ? states("quantized.f32") : nullptr;
    auto rows = [&](detail::HiddenStates& x, std::size_t b) {
        return x.rows(s.starts[batches[b].first] - first_token, blocks.block_tokens[b]);
    };
    auto lengths = [&](std::size_t b) {
        return std::span(s.lengths).subspan(batches[b].first, batches[b].second - batches[b].first);
    };
    for (std::size_t b = first_batch; b < last_batch; ++b) {
        const std::span<float> r = rows(*xs, b);
        const std::vector<float> embedded =
            job.forward->embed(std::span(s.ids).subspan(static_cast<std::size_t>(s.starts[batches[b].first]), r.size() / h));
        std::copy(embedded.begin(), embedded.end(), r.begin());
        if (two) std::copy(embedded.begin(), embedded.end(), rows(*xq, b).begin());
    }

    EvaluationReport report;
    ForwardReadCheck source_reads(cluster, *job.source, plan);  // every rank reads what rank 0 reads
    std::uint64_t total_bytes = 0, bytes_done = 0;
    for (const auto& l : plan.moe_layers) total_bytes += layer_input_bytes(*job.source, l);
    for (std::int64_t index = 0; index < plan.num_hidden_layers; ++index) {
        const auto layer = job.forward->layer(index);
        const MoeLayerPlan* moe = plan.moe_layer(index);
        const ExpertMatrices quantized = two && moe ? job.quantized->layer(index) : ExpertMatrices{};
        // Each block's share of the error, summed in block order below whatever rank ran it.
        std::vector<double> error(batches.size(), 0.0), energy(batches.size(), 0.0);
        std::vector<std::int64_t> routed(moe ? moe->experts.size() : 0, 0);
        for (std::size_t b = first_batch; b < last_batch; ++b) {
            const std::span<float> rs = rows(*xs, b);
            std::vector<float> x(rs.begin(), rs.end());
            const std::vector<float> u = layer->attention(x, lengths(b));
            // The block's output alone (mlp() adds it to a zero x), so the error compares outputs.
            std::vector<float> block(x.size(), 0.0f);
            Routing routing;
            layer->mlp(u, block, {}, moe ? &routing : nullptr);
            for (const std::int32_t e : routing.experts)
                if (e >= 0 && static_cast<std::size_t>(e) < routed.size()) ++routed[static_cast<std::size_t>(e)];
            add(x, block);
            std::copy(x.begin(), x.end(), rs.begin());
            if (!two) continue;
            const std::span<float> rq = rows(*xq, b);
            std::vector<float> y(rq.begin(), rq.end());
            const std::vector<float> uq = layer->attention(y, lengths(b));
            if (quantized) {
                // The probe (the source's input u) and the quantized model's own input uq in one
                // call: the MoE block is token-wise, and each quantized expert is dequantized once.
                std::vector<float> both(u);
                both.insert(both.end(), uq.begin(), uq.end());
                std::vector<float> out(both.size(), 0.0f);
                layer->mlp(both, out, quantized, nullptr);
                const std::span<const float> probe(out.data(), u.size()), own(out.data() + u.size(), uq.size());
                error[b] = squared_distance(probe, block);
                energy[b] = squared_norm(block);
                add(y, own);
            } else {
                layer->mlp(uq, y, quantized, nullptr);
            }
            std::copy(y.begin(), y.end(), rq.begin());
        }
        source_reads.through_layer(index);
        if (moe) {
            share_layer_sums(cluster, first_batch, last_batch, error, energy, routed);
            double e = 0, n = 0;
            for (std::size_t b = 0; b < batches.size(); ++b) e += error[b], n += energy[b];
            report.layers.push_back({index, n > 0 ? std::sqrt(e / n) : std::sqrt(e), std::move(routed)});
            bytes_done += layer_input_bytes(*job.source, *moe);
            release_layer_pages(*job.source, *moe);
        }
        progress.step(static_cast<std::size_t>(index + 1), static_cast<std::size_t>(plan.num_hidden_layers),
                      "layer " + std::to_string(index), bytes_done, total_bytes);
    }

    // Position i predicts token i + 1 of its sample: every position but each sample's last. Each
    // rank scores its own samples; the scores are then summed in sample order, as one process does.
    std::vector<detail::TokenScore> scores;
    const std::size_t first_sample = first_batch < last_batch ? batches[first_batch].first : 0;
    const std::size_t last_sample = first_batch < last_batch ? batches[last_batch - 1].second : 0;
    for (std::size_t sample = first_sample; sample < last_sample; ++sample) {
        const std::int64_t start = s.starts[sample] - first_token, scored = s.lengths[sample] - 1;
        for (std::int64_t i = 0; i < scored; i += logit_rows) {
            const std::int64_t n = std::min(logit_rows, scored - i);
            const std::vector<float> zs = job.forward->logits(xs->rows(start + i, n));
            const std::vector<float> zq = two ? job.forward->logits(xq->rows(start + i, n)) : zs;
            const std::size_t vocab = zs.size() / static_cast<std::size_t>(n);
            for (std::int64_t r = 0; r < n; ++r) {
                const std::int32_t next = s.ids[static_cast<std::size_t>(s.starts[sample] + i + r + 1)];
                if (next < 0 || static_cast<std::size_t>(next) >= vocab)
                    throw Error(ErrorKind::input, "token id " + std::to_string(next) + " is outside the head's vocabulary of " +
                                                      std::to_string(vocab), {.code = "BadToken"});
                const auto at = [&](const std::vector<float>& z) { return std::span(z).subspan(r * vocab, vocab); };
                scores.push_back(detail::score_token(at(zs), at(zq), next));
            }
        }
    }
    double nll_s = 0, nll_q = 0, kl = 0;
    std::int64_t agree = 0;
    std::vector<double> kls;
    share_token_scores(cluster, scores, [&](const detail::TokenScore& t) {
        nll_s += t.nll_source;
        nll_q += t.nll_quantized;
        kl += t.kl;
        agree += t.top1_agrees;
        kls.push_back(t.kl);
    });
    progress.finish();
    const auto count = static_cast<double>(kls.size());
    report.tokens = static_cast<std::int64_t>(kls.size());
    report.perplexity_source = std::exp(nll_s / count);
    report.perplexity_quantized = std::exp(nll_q / count);
    report.kl_mean = kl / count;
    report.top1_agreement = static_cast<double>(agree) / count;
    const std::size_t rank = static_cast<std::size_t>(std::ceil(0.99 * count)) - 1;  // nearest rank
    std::nth_element(kls.begin(), kls.begin() + static_cast<std::ptrdiff_t>(rank), kls.end());
    report.kl_p99 = kls[rank];
    return report;
}

}  // namespace moequant
