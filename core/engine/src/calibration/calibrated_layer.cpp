#include "calibrated_layer.hpp"

#include <moequant/compute_dtype.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/engine/hessian.hpp>
#include <moequant/engine/profiler.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/freed_heap.hpp>
#include <moequant/matrix_products.hpp>
#include <moequant/parallel.hpp>

#include <Eigen/Core>


#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <optional>

namespace moequant {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;


RowMajor to_f32(const Tensor& bf16_matrix) {
    RowMajor m(bf16_matrix.shape()[0], bf16_matrix.shape()[1]);
    convert_bf16_to_f32(bf16_matrix.data(), m.data(), static_cast<std::size_t>(m.size()));
    return m;
}

}  // namespace

// down_proj's input for every token, act(gate x, up x), in the BF16 steps of a BF16 model:
// each Linear's output and every step of the activation are rounded to BF16. With compute dtype bf16 the
// two products of BF16-exact inputs and BF16 weights run as BF16 products (exact operands, FP32
// accumulation: the FP32 path's values up to summation order, before the BF16 roundings);
// otherwise in FP32.
void for_each_down_input_chunk(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens,
                               const Tensor& gate, const Tensor& up, const GatedActivation& activation,
                               const std::function<void(const InputRows&)>& body) {
    const bool bf16_weights = compute_dtype() == ComputeDtype::bf16 && gate.dtype() == DType::BF16 && up.dtype() == DType::BF16;
    std::optional<RowMajor> wg, wu;  // FP32 copies, made when a chunk needs them
    const std::int64_t inter = gate.shape()[0], hidden = gate.shape()[1];
    std::vector<std::uint16_t> x_bf16;
    RowMajor g, u;  // reused by every chunk, not faulted in anew
    for_each_input_chunk(calibration, layer, tokens, calibration_chunk_tokens, [&](const InputRows& rows) {
        g.resize(rows.rows(), inter);
        u.resize(rows.rows(), inter);
        if (bf16_weights && bf16_exact(rows.data(), static_cast<std::size_t>(rows.size()))) {
            x_bf16.resize(static_cast<std::size_t>(rows.size()));
            convert_f32_to_bf16(rows.data(), x_bf16.data(), x_bf16.size());
            bf16_product(x_bf16.data(), gate.data_as<std::uint16_t>(), true, g.data(), rows.rows(), inter, hidden);
            bf16_product(x_bf16.data(), up.data_as<std::uint16_t>(), true, u.data(), rows.rows(), inter, hidden);
        } else {
            if (!wg) wg = to_f32(gate), wu = to_f32(up);
            const std::int64_t n = rows.rows();
            f32_gemm(false, true, n, inter, hidden, 1.0f, rows.data(), hidden, wg->data(), hidden, 0.0f, g.data(), inter);
            f32_gemm(false, true, n, inter, hidden, 1.0f, rows.data(), hidden, wu->data(), hidden, 0.0f, u.data(), inter);
        }
        apply_gated_activation_bf16(activation, g.data(), u.data(), g.size());
        body(g);
    });
}

Tensor down_proj_hessian(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens,
                         const Tensor& gate, const Tensor& up, const GatedActivation& activation) {
    const ProfileSpan span("hessian (down_proj)");
    HessianAccumulator h(gate.shape()[0]);
    for_each_down_input_chunk(calibration, layer, tokens, gate, up, activation, [&](const InputRows& rows) { h.add(rows.data(), rows.rows()); });
    return h.finish(calibration.samples());
}

Tensor expert_input_hessian(const CalibrationActivations& calibration, std::int64_t layer, const ExpertTokens& tokens) {
    const ProfileSpan span("hessian (gate/up)");
    const TensorView x = calibration.layer_inputs(layer);
    HessianAccumulator h(x.shape[1]);
    if (tokens.all) {  // straight from the stored rows, one range at a time
        const std::size_t width = static_cast<std::size_t>(x.shape[1]) * (x.dtype == DType::F32 ? 4 : 2);
        for (const auto& [begin, end] : calibration.token_ranges())
            h.add(TensorView{x.dtype, {end - begin, x.shape[1]}, x.bytes.subspan(begin * width, (end - begin) * width)});
    } else {
        for_each_input_chunk(calibration, layer, tokens, calibration_chunk_tokens, [&](const InputRows& rows) { h.add(rows.data(), rows.rows()); });
    }
    return h.finish(calibration.samples());
}

Tensor down_part_hessian(const Tensor& down_hessian, int part, int parts) {
    if (parts == 1) return Tensor::copy_of(down_hessian.view());
    const std::int64_t width = down_hessian.shape()[0] / parts;
    return hessian_block(down_hessian, part * width, width);
}

LayerCoverage quantize_calibrated_layer(const CalibratedLayerJob& job, const MoeLayerPlan& layer, LayerSink& sink) {
    // Each projection's facet, asked for once per layer.
    std::array<const QuantizerCalibration*, expert_projections.size()> facets{};
    for (Projection p : expert_projections) {
        facets[static_cast<std::size_t>(p)] = job.quantizer->quantizer_for({layer.layer, p}).calibration();
        if (!facets[static_cast<std::size_t>(p)])
            throw Error(ErrorKind::internal, std::string(job.quantizer->id()) + " has no calibration facet for an expert matrix");
    }
    auto facet = [&](Projection p) -> const QuantizerCalibration& { return *facets[static_cast<std::size_t>(p)]; };
    // Gate and up see the same inputs: their prepared Hessian is gate's facet's, which up's
    // accepts (a quantizer's variants share one preparation).
    const QuantizerCalibration& gate_up_q = facet(Projection::gate);
    const QuantizerCalibration& down_q = facet(Projection::down);
    const std::vector<ExpertTokens> tokens = expert_tokens(*job.calibration, *job.plan, layer, *job.source);
    const LayerCoverage coverage = layer_coverage(*job.calibration, layer, tokens);
    // Experts that see all tokens share one prepared gate/up Hessian.
    auto owned = [&](std::size_t e) { return !job.owns || job.owns(e); };
    std::shared_ptr<const PreparedCalibration> shared_gate_up;
    for (std::size_t e = 0; e < tokens.size(); ++e)
        if (const ExpertTokens& t = tokens[e]; t.all && owned(e) && !shared_gate_up)
            shared_gate_up = gate_up_q.prepare_calibration(expert_input_hessian(*job.calibration, layer.layer, t));
    if (job.progress && job.calibration->routed_only()) {
        std::size_t fewest = SIZE_MAX, most = 0;
        for (const auto& t : tokens) {
            fewest = std::min(fewest, t.rows.size());
            most = std::max(most, t.rows.size());
        }
        std::string line = "layer " + std::to_string(layer.layer) + ": " + std::to_string(fewest) + " to " +
                           std::to_string(most) + " routed tokens per expert";
        if (!coverage.fallback_experts.empty()) line += "; " + fallback_sentence(coverage);
        job.progress->note(line);
    }
    std::mutex progress_lock;
    std::atomic<std::size_t> done{0};
    std::size_t to_do = 0;
    for (std::size_t e = 0; e < layer.experts.size(); ++e) to_do += owned(e) ? 1 : 0;
    parallel_for(0, layer.experts.size(), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t e = first; e < last; ++e) {
            if (!owned(e)) continue;
            const ExpertPlan& expert = layer.experts[e];
            auto source = [&](Projection p) -> const ExpertWeightSource& { return expert.weights[static_cast<int>(p)]; };
            auto quantize = [&](Projection p, const Tensor& matrix, int part, const PreparedCalibration& calibration) {
                try {
                    const Tensor piece = job.parts == 1 ? Tensor() : split_expert_part(matrix, p, part, job.parts);
                    const TensorView view = job.parts == 1 ? matrix.view() : piece.view();
                    QuantizedTensor quantized = [&] {
                        const ProfileSpan span("quantize (calibrated)", source(p).tensor);
                        return facet(p).quantize_calibrated(view, calibration);
                    }();
                    const ProfileSpan span("write");
                    sink.write({expert.expert, p, part, std::move(quantized)});
                } catch (const Error& err) {
                    throw err.with_context({.tensor = source(p).tensor, .layer = layer.layer});
                }
            };
            const Tensor gate = job.load(source(Projection::gate));
            const Tensor up = job.load(source(Projection::up));
            const std::shared_ptr<const PreparedCalibration> gate_up =
                tokens[e].all ? shared_gate_up
                              : gate_up_q.prepare_calibration(expert_input_hessian(*job.calibration, layer.layer, tokens[e]));
            for (int part = 0; part < job.parts; ++part) {
                quantize(Projection::gate, gate, part, *gate_up);
                quantize(Projection::up, up, part, *gate_up);
            }
            const Tensor down = job.load(source(Projection::down));
            const Tensor down_hessian =
                down_proj_hessian(*job.calibration, layer.layer, tokens[e], gate, up, job.plan->expert_activation);
            for (int part = 0; part < job.parts; ++part) {
                const auto calibration = job.parts == 1 ? down_q.prepare_calibration(down_hessian)
                                                        : down_q.prepare_calibration(down_part_hessian(down_hessian, part, job.parts));
                quantize(Projection::down, down, part, *calibration);
            }
            return_freed_heap();  // the expert's buffers back to the kernel, not kept in this thread's arena
            if (job.progress) {
                const std::size_t n = ++done;
                std::lock_guard lock(progress_lock);
                job.progress->status("layer " + std::to_string(layer.layer) + ": expert " + std::to_string(expert.expert) +
                                   " quantized (" + std::to_string(n) + "/" + std::to_string(to_do) + ")");
            }
        }
    });
    job.calibration->release_layer(layer.layer);
    return coverage;
}

}  // namespace moequant
