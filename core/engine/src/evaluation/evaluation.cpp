#include "calibration/hidden_states.hpp"
#include "calibration/sample_batches.hpp"
#include "evaluation/token_scores.hpp"

#include <moequant/engine/evaluation.hpp>
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

}  // namespace

EvaluationReport run_evaluation(const EvaluationJob& job, ProgressSink& progress) {
    if (!job.forward || !job.source || !job.plan) throw Error(ErrorKind::internal, "incomplete evaluation job");
    const ModelPlan& plan = *job.plan;
    const Samples s = flatten(job.samples);
    if (s.tokens <= static_cast<std::int64_t>(s.lengths.size()))
        throw Error(ErrorKind::input, "no sample has two tokens: eval scores each token's successor", {.code = "BadDataset"});
    const std::int64_t h = plan.hidden_size;
    const bool two = job.quantized != nullptr;
    // Under a budget: half for the hidden states (both models' share it), half for a batch's work.
    const std::uint64_t state_bytes = static_cast<std::uint64_t>(s.tokens * h) * sizeof(float);
    const bool mapped = job.max_memory > 0 && (two ? 2 : 1) * state_bytes > job.max_memory / 2;
    auto states = [&](const char* name) {
        return std::make_unique<detail::HiddenStates>(s.tokens, h, mapped ? job.scratch / name : std::filesystem::path());
    };
    const auto xs = states("source.f32");
    const auto xq = two ? states("quantized.f32") : nullptr;
    // A batch's quantized MoE call runs over both models' tokens at once (below): twice the rows.
    const auto batches = detail::sample_batches(s.lengths, detail::batch_token_limit(job.max_memory / (two ? 4 : 2), h, s.tokens));
    auto rows = [&](detail::HiddenStates& x, std::size_t b) {
        const auto [first, last] = batches[b];
        return x.rows(s.starts[first], s.starts[last - 1] + s.lengths[last - 1] - s.starts[first]);
    };
    auto lengths = [&](std::size_t b) {
        return std::span(s.lengths).subspan(batches[b].first, batches[b].second - batches[b].first);
    };
    for (std::size_t b = 0; b < batches.size(); ++b) {
        const std::span<float> r = rows(*xs, b);
        const std::vector<float> embedded =
            job.forward->embed(std::span(s.ids).subspan(static_cast<std::size_t>(s.starts[batches[b].first]), r.size() / h));
        std::copy(embedded.begin(), embedded.end(), r.begin());
        if (two) std::copy(embedded.begin(), embedded.end(), rows(*xq, b).begin());
    }

    EvaluationReport report;
    std::uint64_t total_bytes = 0, bytes_done = 0;
    for (const auto& l : plan.moe_layers) total_bytes += layer_input_bytes(*job.source, l);
    for (std::int64_t index = 0; index < plan.num_hidden_layers; ++index) {
        const auto layer = job.forward->layer(index);
        const MoeLayerPlan* moe = plan.moe_layer(index);
        const ExpertMatrices quantized = two && moe ? job.quantized->layer(index) : ExpertMatrices{};
        double error = 0, energy = 0;
        std::vector<std::int64_t> routed(moe ? moe->experts.size() : 0, 0);
        for (std::size_t b = 0; b < batches.size(); ++b) {
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
                error += squared_distance(probe, block);
                energy += squared_norm(block);
                add(y, own);
            } else {
                layer->mlp(uq, y, quantized, nullptr);
            }
            std::copy(y.begin(), y.end(), rq.begin());
        }
        if (moe) {
            report.layers.push_back({index, energy > 0 ? std::sqrt(error / energy) : std::sqrt(error), std::move(routed)});
            bytes_done += layer_input_bytes(*job.source, *moe);
            release_layer_pages(*job.source, *moe);
        }
        progress.step(static_cast<std::size_t>(index + 1), static_cast<std::size_t>(plan.num_hidden_layers),
                      "layer " + std::to_string(index), bytes_done, total_bytes);
    }

    // Position i predicts token i + 1 of its sample: every position but each sample's last.
    double nll_s = 0, nll_q = 0, kl = 0;
    std::int64_t agree = 0;
    std::vector<double> kls;
    for (std::size_t sample = 0; sample < s.lengths.size(); ++sample) {
        const std::int64_t start = s.starts[sample], scored = s.lengths[sample] - 1;
        for (std::int64_t i = 0; i < scored; i += logit_rows) {
            const std::int64_t n = std::min(logit_rows, scored - i);
            const std::vector<float> zs = job.forward->logits(xs->rows(start + i, n));
            const std::vector<float> zq = two ? job.forward->logits(xq->rows(start + i, n)) : zs;
            const std::size_t vocab = zs.size() / static_cast<std::size_t>(n);
            for (std::int64_t r = 0; r < n; ++r) {
                const std::int32_t next = s.ids[static_cast<std::size_t>(start + i + r + 1)];
                if (next < 0 || static_cast<std::size_t>(next) >= vocab)
                    throw Error(ErrorKind::input, "token id " + std::to_string(next) + " is outside the head's vocabulary of " +
                                                      std::to_string(vocab), {.code = "BadToken"});
                const auto at = [&](const std::vector<float>& z) { return std::span(z).subspan(r * vocab, vocab); };
                const detail::TokenScore t = detail::score_token(at(zs), at(zq), next);
                nll_s += t.nll_source;
                nll_q += t.nll_quantized;
                kl += t.kl;
                agree += t.top1_agrees;
                kls.push_back(t.kl);
            }
        }
    }
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
