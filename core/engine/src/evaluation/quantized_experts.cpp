#include <moequant/digest.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/engine/expert_parts.hpp>
#include <moequant/engine/quantized_experts.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/engine/source_bound_quantizer.hpp>
#include <moequant/engine/source_reads.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <chrono>
#include <set>

namespace moequant {

namespace fs = std::filesystem;

namespace {

std::string key_text(const StoredPartKey& k) {
    return "layer " + std::to_string(k.layer) + " expert " + std::to_string(k.expert) + " " +
           std::string(projection_name(k.projection)) + " part " + std::to_string(k.part);
}

// The shape of part `part` of `parts` of a [rows, cols] projection (split_expert_part's rule).
Shape part_shape(const ExpertWeightSource& source, Projection projection, int parts) {
    if (projection == Projection::down) return {source.rows, source.cols / parts};
    return {source.rows / parts, source.cols};
}

}  // namespace

ReplacementExperts::~ReplacementExperts() = default;

QuantizedExperts::QuantizedExperts(const Registry& registry, const fs::path& directory, const Checkpoint& source,
                                   const ModelPlan& plan)
    : directory_(directory), plan_(plan), output_(open_converted_output(registry, directory)) {
    const std::string folder = directory.string();
    auto refuse = [&](const std::string& what, const char* code, const std::string& hint = {}) {
        return Error(ErrorKind::input, what, {.file = folder, .code = code, .hint = hint});
    };
    // Which model: the manifest moequant wrote says; outputs of other tools are checked by shape only.
    if (const auto manifest = RunManifest::load(directory)) {
        if (!manifest->source_fingerprint.empty() && manifest->source_fingerprint != source_fingerprint(source))
            throw refuse("is the output of another model (its run manifest's source fingerprint is not this source's)",
                         "OtherModel", "pass the --model_id the output was converted from");
        if (!manifest->plan_digest.empty() && manifest->plan_digest != plan_digest(plan, source))
            throw refuse("was converted with another plan of this model (another --family?)", "OtherPlan");
    }
    format_ = std::string(output_.format->id());
    quantizer_ = source_bound_quantizer(output_quantizer(registry, *output_.reader, ""), source, plan);
    quantizer_id_ = std::string(quantizer_->id());
    const Options recorded = output_.reader->recorded();
    experts_on_ = recorded.get_string("experts_on", "");
    if (auto e = recorded.get("experts"); e && !plan.moe_layers.empty() && *e != std::to_string(plan.num_experts))
        throw refuse("records " + *e + " experts per layer, the source has " + std::to_string(plan.num_experts), "OtherModel");

    const std::vector<StoredPartKey> keys = output_.reader->parts();
    const std::set<StoredPartKey> stored(keys.begin(), keys.end());
    int highest = 0;
    for (const auto& k : keys) highest = std::max(highest, k.part + 1);
    parts_ = stored_part_count(*output_.reader);
    if (parts_ <= 0) throw refuse("holds no quantized part", "EmptyOutput");
    if (highest != parts_)
        throw refuse("records " + std::to_string(parts_) + " threadpool part(s) but stores " + std::to_string(highest),
                     "PartCountMismatch");
    std::size_t expected = 0;
    for (const auto& layer : plan.moe_layers)
        for (const auto& e : layer.experts)
            for (Projection p : expert_projections) {
                const ExpertWeightSource& w = e.weights[static_cast<int>(p)];
                if ((p == Projection::down ? w.cols : w.rows) % parts_ != 0)
                    throw refuse("has " + std::to_string(parts_) + " parts, which do not divide " + w.tensor, "PartCountMismatch");
                for (int part = 0; part < parts_; ++part) {
                    const StoredPartKey key{layer.layer, e.expert, p, part};
                    if (!stored.count(key))
                        throw refuse("has no " + key_text(key) + " (" + w.tensor + ")", "MissingExperts",
                                     "convert every MoE layer of the source into it");
                    ++expected;
                }
            }
    if (stored.size() != expected)
        for (const auto& k : keys)
            if (!plan.moe_layer(k.layer) || k.expert >= static_cast<std::int64_t>(plan.moe_layer(k.layer)->experts.size()))
                throw refuse("holds " + key_text(k) + ", which the source has not", "OtherModel");
    // Every part whole and in the quantizer's layout (a kt tree missing one file of a part, a
    // wrong scheme) fails here, not mid-forward: this reads the output once, in parallel.
    for (const auto& layer : plan.moe_layers) {
        const std::size_t tasks = layer.experts.size() * expert_projections.size();
        parallel_for(0, tasks, 1, [&](std::size_t begin, std::size_t end) {
            for (std::size_t t = begin; t < end; ++t) {
                const ExpertPlan& e = layer.experts[t / expert_projections.size()];
                const Projection p = expert_projections[t % expert_projections.size()];
                for (int i = 0; i < parts_; ++i)
                    check_layout({layer.layer, e.expert, p, i}, part_shape(e.weights[static_cast<int>(p)], p, parts_));
            }
        });
    }
    // Then the bytes: every file as the conversion wrote it (a structural fault is named above).
    if (const auto manifest = RunManifest::load(directory)) check_recorded_digests(*manifest);
}

void QuantizedExperts::check_recorded_digests(const RunManifest& manifest) const {
    // Every file the manifest records, by content, as verify checks it: what eval measures is
    // then the output the conversion wrote (and, under mpirun, the same on every rank: the
    // ranks compare their manifests).
    std::vector<const ManifestFile*> files;
    for (const auto& layer : manifest.completed_layers)
        for (const auto& f : layer.files) files.push_back(&f);
    for (const auto& f : manifest.final_files) files.push_back(&f);
    std::vector<std::string> changed(files.size());
    const auto start = std::chrono::steady_clock::now();
    std::uint64_t bytes = 0;
    for (const auto* f : files) bytes += f->bytes;
    parallel_for(0, files.size(), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t i = first; i < last; ++i) {
            const fs::path file = directory_ / files[i]->name;
            std::error_code ec;
            if (!fs::is_regular_file(file, ec) || fs::file_size(file, ec) != files[i]->bytes || ec)
                changed[i] = "is missing or has another size than its run manifest records";
            else if (file_digest(file) != files[i]->digest)
                changed[i] = "holds other bytes than its run manifest records (changed after it was written)";
        }
    });
    add_digest_cost(bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    for (std::size_t i = 0; i < files.size(); ++i)
        if (!changed[i].empty())
            throw Error(ErrorKind::input, files[i]->name + " " + changed[i],
                        {.file = directory_.string(), .code = "OutputChanged",
                         .hint = "convert it again, or see what differs with verify --source"});
}

StoredPart QuantizedExperts::check_layout(const StoredPartKey& key, const Shape& shape) const {
    StoredPart stored = output_.reader->read(key);
    auto bad = [&](const std::string& why) {
        return Error(ErrorKind::input, key_text(key) + " " + why, {.file = directory_.string(), .tensor = stored.location, .code = "BadPart"});
    };
    if (stored.tensor.unquantized) {  // a layer kept in BF16: its one weight
        const Tensor* w = stored.tensor.part("weight");
        if (!w || w->shape() != shape) throw bad("is kept unquantized but is not one weight " + shape_to_string(shape));
        return stored;
    }
    const std::vector<TensorSpec> layout = quantizer_->quantizer_for({key.layer, key.projection}).output_layout(shape);
    for (const TensorSpec& spec : layout) {
        const Tensor* t = stored.tensor.part(spec.name);
        if (!t) throw bad("has no '" + spec.name + "' (" + quantizer_id_ + " stores one for a " + shape_to_string(shape) + " matrix)");
        if (t->dtype() != spec.dtype || t->shape() != spec.shape)
            throw bad("'" + spec.name + "' is not " + std::string(dtype_name(spec.dtype)) + " " + shape_to_string(spec.shape) +
                      " as " + quantizer_id_ + " stores a " + shape_to_string(shape) + " matrix");
    }
    if (layout.size() != stored.tensor.parts.size()) throw bad("has tensors beyond " + quantizer_id_ + "'s layout");
    return stored;
}

Tensor QuantizedExperts::part(const StoredPartKey& key, const Shape& shape) const {
    const StoredPart stored = check_layout(key, shape);
    if (!stored.tensor.unquantized) return quantizer_->quantizer_for({key.layer, key.projection}).dequantize(stored.tensor, shape);
    Tensor out(DType::F32, shape);
    decode_to_f32(stored.tensor.part("weight")->view(), std::span(out.data_as<float>(), out.elements()));
    return out;
}

Tensor QuantizedExperts::matrix(std::int64_t layer, const ExpertWeightSource& source, std::int64_t expert,
                                Projection projection) const {
    const Shape shape = part_shape(source, projection, parts_);
    if (parts_ == 1) return part({layer, expert, projection, 0}, shape);
    std::vector<Tensor> pieces;
    for (int p = 0; p < parts_; ++p) pieces.push_back(part({layer, expert, projection, p}, shape));
    return join_expert_parts(pieces, projection);
}

ExpertMatrices QuantizedExperts::layer(std::int64_t layer) const {
    const MoeLayerPlan* moe = plan_.moe_layer(layer);
    if (!moe) throw Error(ErrorKind::internal, "layer " + std::to_string(layer) + " has no routed experts");
    return [this, moe, layer](std::int64_t expert, Projection projection) {
        const ExpertPlan& e = moe->experts.at(static_cast<std::size_t>(expert));
        return matrix(layer, e.weights[static_cast<int>(projection)], e.expert, projection);
    };
}

}  // namespace moequant
