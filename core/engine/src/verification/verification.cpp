#include "calibration/calibrated_layer.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/engine/hessian.hpp>
#include <moequant/engine/verification.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/parallel.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>

namespace moequant {

namespace {


std::string describe(const StoredPartKey& k) {
    return "layer " + std::to_string(k.layer) + " expert " + std::to_string(k.expert) + " " +
           std::string(projection_name(k.projection)) + " part " + std::to_string(k.part);
}

// The stored tensors must be exactly what the quantizer's layout says: names, dtypes, sizes.
std::string layout_problem(const QuantizedTensor& stored, const std::vector<TensorSpec>& layout) {
    std::string problem;
    auto add = [&](const std::string& p) { problem += (problem.empty() ? "" : "; ") + p; };
    for (const auto& spec : layout) {
        const Tensor* t = stored.part(spec.name);
        if (!t) {
            add("missing tensor '" + spec.name + "'");
            continue;
        }
        if (t->dtype() != spec.dtype)
            add("'" + spec.name + "' is " + std::string(dtype_name(t->dtype())) + ", expected " +
                std::string(dtype_name(spec.dtype)));
        else if (t->shape() != spec.shape)
            add("'" + spec.name + "' has shape " + shape_to_string(t->shape()) + ", expected " + shape_to_string(spec.shape));
    }
    for (const auto& [name, t] : stored.parts) {
        bool expected = false;
        for (const auto& spec : layout) expected = expected || spec.name == name;
        if (!expected) add("unexpected tensor '" + name + "'");
    }
    return problem;
}

// The recorded settings the quantizer's layout follows, e.g. " (the layout of gptq with the
// output's num_bits 8, strategy group, group_size 128)": a part that does not fit them
// contradicts what the output says about itself (compressed-tensors' quantization_config).
std::string recorded_scheme(const Quantizer& quantizer, const OutputReader& output) {
    const Options recorded = output.recorded(), settings = quantizer.settings();
    std::string listed;
    for (const auto& [key, value] : settings.items())
        if (recorded.get(key) == value) listed += (listed.empty() ? "" : ", ") + key + " " + value;
    if (listed.empty()) return {};
    return " (the layout of " + std::string(quantizer.id()) + " with the output's " + listed + ")";
}

std::vector<float> source_values(const Tensor& bf16) {
    std::vector<float> out(bf16.elements());
    decode_to_f32(bf16.view(), out);
    return out;
}

// Element-wise comparison of the decoded part with its BF16 source.
void compare_values(const std::vector<float>& source, const Tensor& decoded, const std::optional<Tensor>& bounds,
                    PartCheck& check) {
    const float* d = decoded.data_as<float>();
    const std::int64_t cols = check.cols;
    const std::int64_t groups = bounds ? bounds->shape()[1] : 1;
    const std::int64_t group_cols = cols / groups;
    double error_energy = 0, source_energy = 0;
    for (std::int64_t r = 0; r < check.rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            const std::size_t i = static_cast<std::size_t>(r * cols + c);
            if (std::isnan(d[i])) {
                ++check.nan;
                continue;
            }
            if (std::isinf(d[i])) {
                ++check.inf;
                continue;
            }
            const double err = std::fabs(static_cast<double>(source[i]) - d[i]);
            check.max_abs_error = std::max(check.max_abs_error, err);
            error_energy += err * err;
            source_energy += static_cast<double>(source[i]) * source[i];
            if (bounds) {
                const double bound = bounds->data_as<float>()[r * groups + c / group_cols];
                if (err > bound) ++check.beyond_bound;
                if (bound > 0) check.bound_use = std::max(check.bound_use, err / bound);
                else if (err > 0) check.bound_use = std::numeric_limits<double>::infinity();
            }
        }
    check.rel_rms_error = source_energy > 0 ? std::sqrt(error_energy / source_energy) : std::sqrt(error_energy);
    check.snr_db = error_energy > 0 ? 10.0 * std::log10(source_energy / error_energy) : std::numeric_limits<double>::infinity();
}

// y = W x straight from the packed layout against the source's product. Each row must stay
// within sum_c bound(r, c) |x_c| of the source product (the quantization error can do no
// more), plus float accumulation slack.
void check_gemv(const Quantizer& quantizer, const QuantizedTensor& stored, const std::vector<float>& source,
                const std::optional<Tensor>& bounds, std::uint64_t seed, PartCheck& check) {
    const std::int64_t rows = check.rows, cols = check.cols;
    std::vector<float> x(static_cast<std::size_t>(cols)), y(static_cast<std::size_t>(rows));
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : x) v = normal(rng);
    if (!quantizer.packed_gemv(stored, Shape{rows, cols}, x.data(), y.data())) return;
    const std::int64_t groups = bounds ? bounds->shape()[1] : 1;
    double diff_energy = 0, ref_energy = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
        double ref = 0, magnitude = 0, allowed = 0;
        for (std::int64_t c = 0; c < cols; ++c) {
            const double w = source[static_cast<std::size_t>(r * cols + c)], xc = x[static_cast<std::size_t>(c)];
            ref += w * xc;
            magnitude += std::fabs(w * xc);
            if (bounds) allowed += bounds->data_as<float>()[r * groups + c / (cols / groups)] * std::fabs(xc);
        }
        const double diff = std::fabs(static_cast<double>(y[static_cast<std::size_t>(r)]) - ref);
        diff_energy += diff * diff;
        ref_energy += ref * ref;
        if (bounds && !(diff <= allowed * (1 + 1e-6) + 1e-6 * (magnitude + allowed))) ++check.gemv_rows_beyond_bound;
    }
    check.gemv_rel_error = ref_energy > 0 ? std::sqrt(diff_energy / ref_energy) : std::sqrt(diff_energy);
}

// Output error on the calibration data, relative to the source's output energy `energy`.
double relative_output_error(const Tensor& hessian, const std::vector<float>& source, const float* decoded,
                             std::int64_t rows, double energy) {
    const double error = output_error(hessian, decoded, source.data(), rows);
    return energy > 0 ? error / energy : error;
}

void check_part(const VerificationJob& job, const StoredPartKey& key, const Tensor& source_part, const Tensor* hessian,
                PartCheck& check) {
    const StoredPart stored = job.output->read(key);
    check.location = stored.location;
    const Shape shape = source_part.shape();
    check.rows = shape[0];
    check.cols = shape[1];
    const MatrixRole role{key.layer, key.projection};
    const Quantizer& quantizer = job.quantizer->quantizer_for(role);
    if (auto problem = layout_problem(stored.tensor, quantizer.output_layout(shape)); !problem.empty()) {
        check.problem = problem + recorded_scheme(quantizer, *job.output);
        return;
    }
    const Tensor decoded = quantizer.dequantize(stored.tensor, shape);
    const std::optional<Tensor> bounds = quantizer.error_bounds(stored.tensor, shape);
    check.has_bound = bounds.has_value();
    check.saturated_rows = quantizer.saturated_rows(stored.tensor, shape);  // their bound covers them
    const std::vector<float> source = source_values(source_part);
    compare_values(source, decoded, bounds, check);
    if (job.gemv) check_gemv(quantizer, stored.tensor, source, bounds, job.gemv_seed, check);

    std::string problem;
    auto add = [&](const std::string& p) { problem += (problem.empty() ? "" : "; ") + p; };
    if (auto p = quantizer.stored_problem(stored.tensor, source_part.view()); !p.empty()) add(p);
    if (hessian) {
        const std::vector<float> zero(source.size(), 0.0f);
        const double energy = output_error(*hessian, source.data(), zero.data(), check.rows);
        check.output_error = relative_output_error(*hessian, source, decoded.data_as<float>(), check.rows, energy);
        if (job.reference) {
            const Quantizer& reference_quantizer = job.reference->quantizer_for(role);
            const Tensor reference = reference_quantizer.dequantize(reference_quantizer.quantize(source_part.view()), shape);
            check.reference_output_error = relative_output_error(*hessian, source, reference.data_as<float>(), check.rows, energy);
            if (quantizer.calibration() && *check.output_error > *check.reference_output_error)
                add("output error on the calibration data " + std::to_string(*check.output_error) + " exceeds " +
                    std::string(job.reference->id()) + "'s " + std::to_string(*check.reference_output_error));
        }
    }
    if (check.nan || check.inf)
        add(std::to_string(check.nan) + " NaN and " + std::to_string(check.inf) + " Inf decoded values");
    if (check.beyond_bound)
        add(std::to_string(check.beyond_bound) + " element(s) beyond the error bound (worst at " +
            std::to_string(check.bound_use) + "x the bound)");
    if (check.gemv_rows_beyond_bound)
        add("packed y = W x: " + std::to_string(check.gemv_rows_beyond_bound) + " row(s) beyond the bound");
    check.problem = problem;
}

// An expert matrix the output keeps unquantized: one floating "weight" (BF16, or F16/F32 as
// gptq --torch_dtype writes it), equal to the source rounded once to that dtype.
void check_kept_part(const VerificationJob& job, const StoredPartKey& key, const Tensor& source_part, PartCheck& check) {
    const StoredPart stored = job.output->read(key);
    check.location = stored.location;
    check.rows = source_part.shape()[0];
    check.cols = source_part.shape()[1];
    const Tensor* weight = stored.tensor.part("weight");
    const bool floating = weight && (weight->dtype() == DType::BF16 || weight->dtype() == DType::F16 || weight->dtype() == DType::F32);
    if (!floating || stored.tensor.parts.size() != 1 || weight->shape() != source_part.shape()) {
        check.problem = "the layer's experts are kept unquantized, but this part is not one BF16, F16 or F32 weight " +
                        shape_to_string(source_part.shape());
        return;
    }
    std::vector<float> source = source_values(source_part);
    const std::vector<float> kept = source_values(*weight);
    if (weight->dtype() == DType::F16)  // BF16 -> F16 rounds; BF16 -> F32 is exact
        for (float& v : source) v = f16_to_f32(f32_to_f16(v));
    std::int64_t differing = 0;
    for (std::size_t i = 0; i < source.size(); ++i)
        if (std::memcmp(&source[i], &kept[i], 4) != 0) {
            ++differing;
            check.max_abs_error = std::max(check.max_abs_error, std::fabs(static_cast<double>(source[i]) - kept[i]));
        }
    check.snr_db = differing ? 0 : std::numeric_limits<double>::infinity();
    if (differing) check.problem = "the unquantized weight differs from the source in " + std::to_string(differing) + " element(s)";
}

// The items of a comma-separated recorded list ("1,3" -> {"1", "3"}).
std::vector<std::string> comma_separated(const std::string& list) {
    std::vector<std::string> items;
    for (std::size_t at = 0; at < list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        items.push_back(list.substr(at, comma - at));
        at = comma + 1;
    }
    return items;
}

// Recorded facts that must agree with the job: part count and expert count.
void check_recorded(const VerificationJob& job, int parts, VerificationReport& report) {
    const Options recorded = job.output->recorded();
    if (auto p = recorded.get("parts"); p && *p != std::to_string(parts))
        report.problems.push_back("the output records " + *p + " threadpool parts, but " + std::to_string(parts) +
                                  " were expected");
    if (auto e = recorded.get("experts"); e && !job.plan->moe_layers.empty() &&
                                          *e != std::to_string(job.plan->moe_layers.front().experts.size()))
        report.problems.push_back("the output records " + *e + " experts per layer, the source has " +
                                  std::to_string(job.plan->moe_layers.front().experts.size()));
}

}  // namespace

int stored_part_count(const OutputReader& output) {
    const Options recorded = output.recorded();
    if (recorded.has("parts")) return static_cast<int>(recorded.get_int("parts", 0));
    int parts = 0;
    for (const auto& key : output.parts()) parts = std::max(parts, key.part + 1);
    return parts;
}

bool VerificationReport::passed() const noexcept {
    if (!problems.empty()) return false;
    for (const auto& c : checks)
        if (!c.problem.empty()) return false;
    return true;
}

// The id of the installed quantizer that publishes the output's recorded method under one of the
// fact keys the output names (OutputReader::recorded(), "method_fact_keys"): what made an output
// that does not name its quantizer (the reference converter's kt outputs). Empty if none. A
// quantizer that calibrates (amx-int4-gptq) publishes the same method as the plain one, but only
// an output that records it was made by it.
std::string quantizer_publishing(const Registry& registry, const Options& recorded) {
    const std::string method = recorded.get_string("method", "");
    if (method.empty()) return {};
    const std::vector<std::string> keys = comma_separated(recorded.get_string("method_fact_keys", ""));
    for (const auto& q : registry.quantizers())
        if (!q.object->calibration() &&
            std::any_of(keys.begin(), keys.end(), [&](const std::string& key) { return q.object->published_name(key) == method; }))
            return std::string(q.object->id());
    return {};
}

std::shared_ptr<const Quantizer> output_quantizer(const Registry& registry, const OutputReader& output,
                                                  const std::string& requested) {
    const Options recorded = output.recorded();
    std::string id = requested.empty() ? recorded.get_string("quantizer", "") : requested;
    if (id.empty()) id = quantizer_publishing(registry, recorded);
    if (id.empty())
        throw Error(ErrorKind::input, "the output does not record which quantizer made it",
                    {.code = "UnknownMethod", .hint = "name it with --quantizer (e.g. amx-int4)"});
    const Quantizer* q = registry.quantizer(id);
    if (!q) throw Error(ErrorKind::plugin, "no installed quantizer '" + id + "'", {.hint = "see 'moequant plugins'"});
    return configured_quantizer(*q, recorded);
}

VerificationReport verify_output(const VerificationJob& job, ProgressSink& progress) {
    if (!job.source || !job.plan || !job.quantizer || !job.output) throw Error(ErrorKind::internal, "incomplete verification job");
    VerificationReport report;
    report.quantizer = std::string(job.quantizer->id());
    report.parts = job.parts > 0 ? job.parts : stored_part_count(*job.output);
    const int parts = report.parts;
    if (parts <= 0) throw Error(ErrorKind::input, "the output holds no quantized part", {.code = "EmptyOutput"});
    check_recorded(job, parts, report);
    if (job.calibration) check_routing(*job.calibration, *job.plan, *job.source);
    // Layers the output keeps unquantized (BF16 experts), as it records them.
    std::set<std::int64_t> kept_layers;
    for (const std::string& layer : comma_separated(job.output->recorded().get_string("unquantized_layers", "")))
        kept_layers.insert(std::stoll(layer));

    const std::vector<StoredPartKey> stored_keys = job.output->parts();
    const std::set<StoredPartKey> stored(stored_keys.begin(), stored_keys.end());
    std::set<StoredPartKey> expected;
    std::uint64_t total_bytes = 0;
    for (const auto& layer : job.plan->moe_layers) total_bytes += layer_input_bytes(*job.source, layer);

    std::size_t done = 0;
    std::uint64_t bytes_done = 0;
    for (const auto& layer : job.plan->moe_layers) {
        const std::size_t first_check = report.checks.size();
        for (const auto& e : layer.experts)
            for (Projection p : expert_projections)
                for (int part = 0; part < parts; ++part) {
                    const StoredPartKey key{layer.layer, e.expert, p, part};
                    expected.insert(key);
                    PartCheck check;
                    check.key = key;
                    check.source_tensor = e.weights[static_cast<int>(p)].tensor;
                    if (!stored.count(key)) check.problem = "missing from the output";
                    report.checks.push_back(std::move(check));
                }
        const bool kept = kept_layers.count(layer.layer) > 0;
        // With calibration data: the tokens each expert sees, and the layer's input Hessian
        // for the gate and up of experts that see all of them (each of their row parts sees
        // the whole input; a down part sees its columns' block, down_part_hessian).
        const bool calibrated = job.calibration && !kept;
        std::vector<ExpertTokens> tokens;
        std::optional<Tensor> layer_hessian;
        if (calibrated) {
            tokens = expert_tokens(*job.calibration, *job.plan, layer, *job.source);
            for (const auto& t : tokens)
                if (t.all && !layer_hessian) layer_hessian = expert_input_hessian(*job.calibration, layer.layer, t);
        }
        // One task per (expert, projection): the source matrix is loaded once for its parts.
        const std::size_t tasks = layer.experts.size() * expert_projections.size();
        parallel_for(0, tasks, 1, [&](std::size_t begin, std::size_t end) {
            for (std::size_t t = begin; t < end; ++t) {
                const Projection projection = expert_projections[t % expert_projections.size()];
                const ExpertWeightSource& source = layer.experts[t / expert_projections.size()].weights[static_cast<int>(projection)];
                PartCheck* checks = &report.checks[first_check + t * static_cast<std::size_t>(parts)];
                if (source.rows * source.cols == 0 || (projection == Projection::down ? source.cols : source.rows) % parts != 0) {
                    for (int part = 0; part < parts; ++part)
                        checks[part].problem = "the source matrix cannot be split into " + std::to_string(parts) + " parts";
                    continue;
                }
                try {
                    // The source as the quantizer took it: BF16, or the float32 decode (F16's).
                    const bool float32 = !kept && job.quantizer->quantizer_for({layer.layer, projection}).takes_float32_source();
                    const Tensor matrix = load_expert_matrix(*job.source, source, float32 ? DecodeTarget::f32 : DecodeTarget::bf16);
                    std::optional<Tensor> own_hessian;
                    const Tensor* hessian = nullptr;
                    if (calibrated) {
                        const ExpertTokens& seen = tokens[t / 3];
                        if (projection == Projection::down) {
                            const ExpertPlan& expert = layer.experts[t / 3];
                            own_hessian = down_proj_hessian(*job.calibration, layer.layer, seen,
                                                            load_expert_matrix(*job.source, expert.weights[0]),
                                                            load_expert_matrix(*job.source, expert.weights[1]),
                                                            job.plan->expert_activation);
                        } else if (!seen.all) {
                            own_hessian = expert_input_hessian(*job.calibration, layer.layer, seen);
                        }
                        hessian = own_hessian ? &*own_hessian : &*layer_hessian;
                    }
                    for (int part = 0; part < parts; ++part) {
                        if (!checks[part].problem.empty()) continue;  // missing
                        if (kept) {
                            check_kept_part(job, checks[part].key, matrix, checks[part]);
                            continue;
                        }
                        try {
                            std::optional<Tensor> part_hessian;
                            if (hessian && projection == Projection::down && parts > 1)
                                part_hessian = down_part_hessian(*hessian, part, parts);
                            check_part(job, checks[part].key, split_expert_part(matrix, projection, part, parts),
                                       part_hessian ? &*part_hessian : hessian, checks[part]);
                        } catch (const Error& e) {
                            if (e.kind() != ErrorKind::input) throw;
                            checks[part].problem = e.what();  // unreadable or undecodable: this part fails
                        }
                    }
                } catch (const Error& e) {
                    throw e.with_context({.tensor = source.tensor, .layer = layer.layer});
                }
            }
        });
        release_layer_pages(*job.source, layer);
        if (job.calibration) job.calibration->release_layer(layer.layer);
        ++done;
        bytes_done += layer_input_bytes(*job.source, layer);
        progress.step(done, job.plan->moe_layers.size(), "layer " + std::to_string(layer.layer), bytes_done, total_bytes);
    }
    progress.finish();
    report.source_bytes = total_bytes;
    for (const auto& key : stored_keys)
        if (!expected.count(key)) report.problems.push_back("unexpected part in the output: " + describe(key));
    return report;
}

}  // namespace moequant
