// route_tokens against values worked out by hand from model-families.md §5's router rules.
#include <moequant/error.hpp>
#include <moequant/router.hpp>

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

using namespace moequant;
namespace tt = boost::test_tools;

namespace {

RouterSpec softmax_spec(std::int64_t k, bool normalize) {
    RouterSpec s;
    s.scoring = RouterScoring::softmax;
    s.top_k = k;
    s.normalize = normalize;
    return s;
}

RouterSpec sigmoid_spec(std::int64_t k, std::int64_t groups, std::int64_t kept, double scaling) {
    RouterSpec s;
    s.scoring = RouterScoring::sigmoid;
    s.top_k = k;
    s.groups = groups;
    s.groups_kept = kept;
    s.scaling = scaling;
    s.bf16_logits = false;
    s.uses_bias = true;
    return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(router)

BOOST_AUTO_TEST_CASE(softmax_top_k_renormalized_or_not) {
    // Logits that are exact in BF16; per token the two largest win, best first.
    const std::vector<float> logits = {1, 3, 2, 0,   // token 0: experts 1, 2
                                       0, 0, 0, 4};  // token 1: expert 3, then the tie 0/1/2 goes to 0
    const double sum0 = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1.0;
    const Routing plain = route_tokens(softmax_spec(2, false), logits.data(), 2, 4, nullptr);
    BOOST_TEST(plain.experts == std::vector<std::int32_t>({1, 2, 3, 0}), tt::per_element());
    BOOST_TEST(plain.weights[0] == std::exp(3.0) / sum0, tt::tolerance(1e-6));
    BOOST_TEST(plain.weights[1] == std::exp(2.0) / sum0, tt::tolerance(1e-6));
    const Routing normalized = route_tokens(softmax_spec(2, true), logits.data(), 2, 4, nullptr);
    BOOST_TEST(normalized.weights[0] == std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), tt::tolerance(1e-6));
    BOOST_TEST(normalized.weights[2] + normalized.weights[3] == 1.0, tt::tolerance(1e-6));
    BOOST_TEST(normalized.weights[2] == std::exp(4.0) / (std::exp(4.0) + 1.0), tt::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(softmax_logits_are_rounded_to_the_model_dtype) {
    // 1.0 and 1.001 are the same BF16 value: a tie, which goes to the lower index; in F32 the
    // larger logit wins.
    const std::vector<float> logits = {1.0f, 1.001f, -1.0f};
    RouterSpec spec = softmax_spec(1, true);
    BOOST_TEST(route_tokens(spec, logits.data(), 1, 3, nullptr).experts[0] == 0);
    spec.bf16_logits = false;
    BOOST_TEST(route_tokens(spec, logits.data(), 1, 3, nullptr).experts[0] == 1);
}

BOOST_AUTO_TEST_CASE(sigmoid_bias_chooses_but_does_not_weigh) {
    // All logits 0: s = 0.5 everywhere; the bias alone picks experts 1 and 3. The weights are
    // the unbiased s, normalized (0.5 each) and scaled by 2.5.
    const std::vector<float> logits = {0, 0, 0, 0}, bias = {0.0f, 0.5f, 0.0f, 0.3f};
    const Routing r = route_tokens(sigmoid_spec(2, 1, 1, 2.5), logits.data(), 1, 4, bias.data());
    BOOST_TEST(r.experts == std::vector<std::int32_t>({1, 3}), tt::per_element());
    BOOST_TEST(r.weights == std::vector<float>({1.25f, 1.25f}), tt::per_element());
    // Without normalization: s times the scaling.
    RouterSpec plain = sigmoid_spec(2, 1, 1, 2.0);
    plain.normalize = false;
    const std::vector<float> one = {std::log(3.0f), 0, 0, 0}, no_bias(4, 0.0f);  // sigmoid(ln 3) = 0.75
    const Routing p = route_tokens(plain, one.data(), 1, 4, no_bias.data());
    BOOST_TEST(p.experts == std::vector<std::int32_t>({0, 1}), tt::per_element());  // 0.75, then the lowest 0.5
    BOOST_TEST(p.weights[0] == 1.5f, tt::tolerance(1e-6f));
    BOOST_TEST(p.weights[1] == 1.0f, tt::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(groups_compete_by_their_two_best_experts) {
    // 8 experts in 4 groups of 2, keep 2 groups, top-2; s = 0.5 and the bias sets the choice:
    // group sums g0 = 0.9 + 0.0, g1 = 0.5 + 0.5, g2 = 0.44 + 0.44, g3 = 0.1 + 0.1. Kept: g1
    // and g0. Expert 0 (0.9) first, then g1's tie (0.5, 0.5) goes to expert 2, although
    // group 2's experts (0.44) are better than expert 1 (0.0).
    const std::vector<float> logits(8, 0.0f);
    const std::vector<float> bias = {0.4f, -0.5f, 0.0f, 0.0f, -0.06f, -0.06f, -0.4f, -0.4f};
    const Routing r = route_tokens(sigmoid_spec(2, 4, 2, 1.0), logits.data(), 1, 8, bias.data());
    BOOST_TEST(r.experts == std::vector<std::int32_t>({0, 2}), tt::per_element());
    // The same token with no grouping takes the best two overall.
    const Routing flat = route_tokens(sigmoid_spec(2, 1, 1, 1.0), logits.data(), 1, 8, bias.data());
    BOOST_TEST(flat.experts == std::vector<std::int32_t>({0, 2}), tt::per_element());
    const Routing three = route_tokens(sigmoid_spec(3, 1, 1, 1.0), logits.data(), 1, 8, bias.data());
    BOOST_TEST(three.experts == std::vector<std::int32_t>({0, 2, 3}), tt::per_element());
    const Routing grouped3 = route_tokens(sigmoid_spec(4, 4, 2, 1.0), logits.data(), 1, 8, bias.data());
    BOOST_TEST(grouped3.experts == std::vector<std::int32_t>({0, 2, 3, 1}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(masked_groups_score_zero_as_in_the_hugging_face_code) {
    // Every choice value negative: s = 0.5, bias -1 except expert 0's -0.6 (-0.1 vs -0.5).
    // Only group 0 is kept (pair sum -0.6 against -1.0), but the masked experts' 0.0 beats its
    // -0.1 and -0.5: experts 2 and 3 win, as with HF's masked_fill(0.0).
    const std::vector<float> logits(4, 0.0f), bias = {-0.6f, -1.0f, -1.0f, -1.0f};
    const Routing r = route_tokens(sigmoid_spec(2, 2, 1, 1.0), logits.data(), 1, 4, bias.data());
    BOOST_TEST(r.experts == std::vector<std::int32_t>({2, 3}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(specs_that_do_not_fit_the_layer_are_input_errors) {
    const std::vector<float> logits(6, 0.0f), bias(6, 0.0f);
    auto code = [&](const RouterSpec& spec) {
        try {
            route_tokens(spec, logits.data(), 1, 6, bias.data());
        } catch (const Error& e) {
            BOOST_TEST((e.kind() == ErrorKind::input));
            return e.context().code;
        }
        return std::string("none");
    };
    BOOST_TEST(code(softmax_spec(7, true)) == "InvalidConfig");
    BOOST_TEST(code(softmax_spec(0, true)) == "InvalidConfig");
    BOOST_TEST(code(sigmoid_spec(2, 4, 2, 1.0)) == "InvalidConfig");  // 6 experts in 4 groups
    BOOST_TEST(code(sigmoid_spec(5, 3, 2, 1.0)) == "InvalidConfig");  // 5 > 2 kept groups x 2
    BOOST_TEST(code(sigmoid_spec(2, 6, 2, 1.0)) == "InvalidConfig");  // groups of one expert
    BOOST_TEST(code(sigmoid_spec(4, 3, 2, 1.0)) == "none");
}

BOOST_AUTO_TEST_CASE(description_names_every_setting) {
    BOOST_TEST(describe_router(sigmoid_spec(8, 8, 4, 2.5)) == "sigmoid + bias, top-8 of 8 groups keep 4, normalized, x2.5");
    BOOST_TEST(describe_router(softmax_spec(2, false)) == "softmax, top-2");
}

BOOST_AUTO_TEST_SUITE_END()
