#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/router.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace moequant {

namespace {

// Indices of the k largest values, best first; ties to the lower index.
void top_k(const float* values, std::int64_t n, std::int64_t k, std::vector<std::int32_t>& order,
           std::int32_t* out) {
    order.resize(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int32_t a, std::int32_t b) {
        return values[a] > values[b] || (values[a] == values[b] && a < b);
    });
    std::copy_n(order.begin(), k, out);
}

void check_spec(const RouterSpec& spec, std::int64_t experts) {
    auto bad = [](const std::string& what) {
        throw Error(ErrorKind::input, "the router does not fit the layer: " + what, {.code = "InvalidConfig"});
    };
    if (experts <= 0) bad("no experts");
    if (spec.top_k <= 0 || spec.top_k > experts)
        bad("top-k " + std::to_string(spec.top_k) + " of " + std::to_string(experts) + " experts");
    if (spec.groups < 1 || experts % spec.groups != 0)
        bad(std::to_string(experts) + " experts do not split into n_group " + std::to_string(spec.groups));
    if (spec.groups > 1) {
        if (spec.groups_kept < 1 || spec.groups_kept > spec.groups)
            bad("topk_group " + std::to_string(spec.groups_kept) + " of " + std::to_string(spec.groups) + " groups");
        if (spec.top_k > spec.groups_kept * (experts / spec.groups))
            bad("top-k " + std::to_string(spec.top_k) + " exceeds the experts of the kept groups");
        if (experts / spec.groups < 2) bad("groups of fewer than 2 experts (a group scores its best two)");
    }
}

}  // namespace

const char* router_scoring_name(RouterScoring scoring) noexcept {
    return scoring == RouterScoring::sigmoid ? "sigmoid" : "softmax";
}

std::string describe_router(const RouterSpec& spec) {
    std::string s = router_scoring_name(spec.scoring);
    if (spec.uses_bias) s += " + bias";
    s += ", top-" + std::to_string(spec.top_k);
    if (spec.groups > 1) s += " of " + std::to_string(spec.groups) + " groups keep " + std::to_string(spec.groups_kept);
    if (spec.normalize) s += ", normalized";
    if (spec.scaling != 1.0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, ", x%g", spec.scaling);
        s += buf;
    }
    return s;
}

Routing route_tokens(const RouterSpec& spec, const float* logits, std::int64_t tokens, std::int64_t experts,
                     const float* bias) {
    check_spec(spec, experts);
    if (spec.uses_bias && !bias && tokens > 0) throw Error(ErrorKind::internal, "router bias missing");
    Routing r;
    r.tokens = tokens;
    r.top_k = spec.top_k;
    r.experts.resize(static_cast<std::size_t>(tokens * spec.top_k));
    r.weights.resize(r.experts.size());
    const std::int64_t group_size = experts / spec.groups;
    std::vector<float> score(static_cast<std::size_t>(experts)), choice(score.size()), group_score;
    std::vector<std::int32_t> order, kept_groups(static_cast<std::size_t>(spec.groups_kept));
    for (std::int64_t t = 0; t < tokens; ++t) {
        const float* row = logits + t * experts;
        for (std::int64_t e = 0; e < experts; ++e) score[e] = spec.bf16_logits ? bf16_to_f32(f32_to_bf16(row[e])) : row[e];
        if (spec.scoring == RouterScoring::softmax) {
            const float peak = *std::max_element(score.begin(), score.end());
            float sum = 0;
            for (auto& v : score) sum += (v = std::exp(v - peak));
            for (auto& v : score) v /= sum;
        } else {
            for (auto& v : score) v = 1.0f / (1.0f + std::exp(-v));
        }
        for (std::int64_t e = 0; e < experts; ++e) choice[e] = score[e] + (spec.uses_bias ? bias[e] : 0.0f);
        if (spec.groups > 1) {  // keep the groups whose two best choice values sum highest
            group_score.assign(static_cast<std::size_t>(spec.groups), 0.0f);
            for (std::int64_t g = 0; g < spec.groups; ++g) {
                std::int32_t best2[2];
                top_k(choice.data() + g * group_size, group_size, 2, order, best2);
                group_score[g] = choice[g * group_size + best2[0]] + choice[g * group_size + best2[1]];
            }
            top_k(group_score.data(), spec.groups, spec.groups_kept, order, kept_groups.data());
            std::vector<bool> kept(static_cast<std::size_t>(spec.groups), false);
            for (std::int32_t g : kept_groups) kept[g] = true;
            for (std::int64_t e = 0; e < experts; ++e)
                if (!kept[e / group_size]) choice[e] = 0.0f;
        }
        std::int32_t* chosen = r.experts.data() + t * spec.top_k;
        float* weight = r.weights.data() + t * spec.top_k;
        top_k(choice.data(), experts, spec.top_k, order, chosen);
        float sum = 0;
        for (std::int64_t i = 0; i < spec.top_k; ++i) sum += (weight[i] = score[chosen[i]]);
        const float denominator = spec.scoring == RouterScoring::sigmoid ? sum + 1e-20f : sum;
        for (std::int64_t i = 0; i < spec.top_k; ++i) {
            if (spec.normalize) weight[i] /= denominator;
            weight[i] *= static_cast<float>(spec.scaling);
        }
    }
    return r;
}

}  // namespace moequant
