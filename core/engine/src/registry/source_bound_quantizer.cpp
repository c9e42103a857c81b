#include <moequant/engine/source_bound_quantizer.hpp>

#include <moequant/error.hpp>

#include <string>

namespace moequant {

namespace {

// The bound settings as one line, to tell experts of another form apart and name both forms.
std::string settings_line(const Quantizer& q) {
    std::string line;
    const Options settings = q.settings();
    for (const auto& [key, value] : settings.items()) line += (line.empty() ? "" : ", ") + key + "=" + value;
    return line.empty() ? std::string("(no settings)") : line;
}

}  // namespace

std::shared_ptr<const Quantizer> source_bound_quantizer(std::shared_ptr<const Quantizer> quantizer, const Checkpoint& source,
                                                        const ModelPlan& plan) {
    const StoredCodeCarrier* carrier = quantizer ? quantizer->carrier() : nullptr;
    if (!carrier || plan.moe_layers.empty()) return quantizer;
    const ExpertWeightSource& first = plan.moe_layers.front().experts.front().weights[0];
    std::shared_ptr<const Quantizer> bound = carrier->bind_source(source, first);
    if (!bound) return quantizer;
    // One bound quantizer serves the whole job: every expert matrix must be of the first's form.
    const std::string form = settings_line(*bound);
    for (const auto& layer : plan.moe_layers)
        for (const auto& expert : layer.experts)
            for (const auto& weight : expert.weights) {
                const std::shared_ptr<const Quantizer> other = carrier->bind_source(source, weight);
                const std::string other_form = other ? settings_line(*other) : std::string("not carried over");
                if (other_form != form)
                    throw Error(ErrorKind::input,
                                "the expert's stored form (" + other_form + ") differs from the first expert's (" + form + ", " +
                                    first.tensor + "); " + std::string(quantizer->id()) + " carries one form for the whole model",
                                {.tensor = weight.tensor, .code = "MixedStoredForms"});
            }
    return bound;
}

}  // namespace moequant
