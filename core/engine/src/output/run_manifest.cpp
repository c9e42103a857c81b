#include <moequant/blas_kernels.hpp>
#include <moequant/compute_dtype.hpp>
#include <moequant/cpu_isa.hpp>
#include <moequant/digest.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/error.hpp>
#include <moequant/input_file.hpp>
#include <moequant/matrix_products.hpp>
#include <moequant/output_file.hpp>
#include <moequant/version.hpp>

#include <boost/json.hpp>

#include <sys/stat.h>

namespace moequant {

namespace json = boost::json;

namespace {

json::array files_json(const std::vector<ManifestFile>& files) {
    json::array a;
    for (const auto& f : files) a.push_back(json::object{{"name", f.name}, {"bytes", f.bytes}, {"digest", f.digest}});
    return a;
}

std::vector<ManifestFile> files_from(const json::value& v) {
    std::vector<ManifestFile> out;
    for (const auto& f : v.as_array())
        out.push_back({std::string(f.at("name").as_string()), f.at("bytes").to_number<std::uint64_t>(),
                       std::string(f.at("digest").as_string())});
    return out;
}

json::array shards_json(const std::vector<ManifestShard>& shards) {
    json::array a;
    for (const auto& s : shards)
        a.push_back(json::object{{"name", s.name}, {"bytes", s.bytes}, {"mtime_ns", s.mtime_ns}, {"header_digest", s.header_digest}});
    return a;
}

std::vector<ManifestShard> shards_from(const json::value& v) {
    std::vector<ManifestShard> out;
    for (const auto& s : v.as_array())
        out.push_back({std::string(s.at("name").as_string()), s.at("bytes").to_number<std::uint64_t>(),
                       s.at("mtime_ns").to_number<std::int64_t>(), std::string(s.at("header_digest").as_string())});
    return out;
}

json::array ints_json(const std::vector<std::int64_t>& v) { return json::array(v.begin(), v.end()); }

std::vector<std::int64_t> ints_from(const json::value& v) {
    std::vector<std::int64_t> out;
    for (const auto& x : v.as_array()) out.push_back(x.to_number<std::int64_t>());
    return out;
}

json::object coverage_json(const LayerCoverage& c) {
    return {{"tokens", c.tokens},
            {"routed_only", c.routed_only},
            {"experts", ints_json(c.experts)},
            {"tokens_per_expert", ints_json(c.tokens_per_expert)},
            {"fallback_experts", ints_json(c.fallback_experts)}};
}

LayerCoverage coverage_from(const json::value& v) {
    LayerCoverage c;
    c.tokens = v.at("tokens").to_number<std::int64_t>();
    c.routed_only = v.at("routed_only").as_bool();
    c.experts = ints_from(v.at("experts"));
    c.tokens_per_expert = ints_from(v.at("tokens_per_expert"));
    c.fallback_experts = ints_from(v.at("fallback_experts"));
    if (c.experts.size() != c.tokens_per_expert.size()) throw std::runtime_error("calibration coverage lists do not match");
    return c;
}

// Which kernels computed the floats (calibration's sums depend on them), for whoever compares
// two outputs later; informational, not part of the job's identity.
json::object kernels_json() {
    json::object k{{"cpu_kernels", isa_name(active_isa())},
                   {"compute_dtype", compute_dtype_name(compute_dtype())},
                   {"fp32_gemm", f32_gemm_kernels()},
                   {"fp32_products", blas_kernels()},
                   {"fp32_products_chosen_by", blas_kernels_chosen_by()}};
    if (compute_dtype() == ComputeDtype::bf16) k["bf16_products"] = bf16_product_isa();
    return k;
}

}  // namespace

std::optional<RunManifest> RunManifest::load(const std::filesystem::path& directory) {
    const auto path = directory / run_manifest_name;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::nullopt;
    const std::string text = read_small_file(path, json_file_limit);
    try {
        json::object o = json::parse(text).as_object();
        RunManifest m;
        m.tool_version = o.at("tool_version").as_string();
        m.command = o.at("command").as_string();
        for (const auto& kv : o.at("settings").as_object()) m.settings.emplace_back(kv.key(), kv.value().as_string());
        m.source_fingerprint = o.at("source_fingerprint").as_string();
        m.plan_digest = o.at("plan_digest").as_string();
        if (const json::value* shards = o.if_contains("source_shards")) m.source_shards = shards_from(*shards);
        for (const auto& l : o.at("completed_layers").as_array()) {
            ManifestLayer layer{l.at("layer").to_number<std::int64_t>(), files_from(l.at("files")), std::nullopt};
            if (const json::value* c = l.as_object().if_contains("calibration")) layer.coverage = coverage_from(*c);
            if (const json::value* d = l.as_object().if_contains("source_digest")) layer.source_digest = d->as_string();
            m.completed_layers.push_back(std::move(layer));
        }
        m.final_files = files_from(o.at("final_files"));
        m.complete = o.at("complete").as_bool();
        return m;
    } catch (const std::exception& e) {
        throw Error(ErrorKind::input, std::string("unreadable run manifest: ") + e.what(),
                    {.file = path.string(), .code = "InvalidManifest", .hint = "remove it, or pass --overwrite"});
    }
}

void RunManifest::save(const std::filesystem::path& directory) const { write_file_atomically(directory / run_manifest_name, text()); }

std::string RunManifest::text() const {
    json::object settings_json;
    for (const auto& [k, v] : settings) settings_json[k] = v;
    json::array layers;
    for (const auto& l : completed_layers) {
        json::object layer{{"layer", l.layer}, {"files", files_json(l.files)}};
        if (l.coverage) layer["calibration"] = coverage_json(*l.coverage);
        if (!l.source_digest.empty()) layer["source_digest"] = l.source_digest;
        layers.push_back(std::move(layer));
    }
    json::object o{{"tool_version", tool_version},
                   {"command", command},
                   {"settings", std::move(settings_json)},
                   {"source_fingerprint", source_fingerprint},
                   {"plan_digest", plan_digest},
                   {"source_shards", shards_json(source_shards)},
                   {"completed_layers", std::move(layers)},
                   {"final_files", files_json(final_files)},
                   {"complete", complete},
                   {"kernels", kernels_json()}};
    return json::serialize(o) + "\n";
}

const ManifestLayer* RunManifest::completed(std::int64_t layer) const noexcept {
    for (const auto& l : completed_layers)
        if (l.layer == layer) return &l;
    return nullptr;
}

bool RunManifest::same_job(const RunManifest& other) const noexcept {
    return command == other.command && settings == other.settings && source_fingerprint == other.source_fingerprint &&
           plan_digest == other.plan_digest;
}

const ManifestShard* RunManifest::source_shard(const std::string& name) const noexcept {
    for (const auto& s : source_shards)
        if (s.name == name) return &s;
    return nullptr;
}

std::vector<ManifestShard> source_shard_records(const Checkpoint& checkpoint) {
    std::vector<ManifestShard> out;
    for (const auto& name : checkpoint.shard_names()) {
        const SafetensorsFile& shard = checkpoint.shard(name);
        struct stat st {};
        std::int64_t mtime = 0;
        if (::stat(shard.path().c_str(), &st) == 0)
            mtime = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
        out.push_back({name, shard.file_size(), mtime, shard.header_digest()});
    }
    return out;
}

std::string source_fingerprint(const Checkpoint& checkpoint) {
    Digest64 d;
    if (auto config = checkpoint.side_file("config.json")) d.update(*config);
    for (const auto& name : checkpoint.shard_names()) d.update(name + "\n");
    return d.hex();
}

namespace {

// A weight's encoding as the digest sees it: which plugin decodes it from which tensors, how.
std::string encoding_line(const EncodedWeight& w) {
    std::string line = w.encoding + "|" + w.input_type;
    for (const auto& [role, tensor] : w.tensors) line += "|" + role + "=" + tensor;
    for (const auto& [key, value] : w.parameters.items()) line += "|" + key + "=" + value;
    return line;
}

}  // namespace

std::string plan_digest(const ModelPlan& plan, const Checkpoint& source) {
    Digest64 d;
    auto add = [&](const std::string& s) { d.update(s + "\n"); };
    add(plan.family + "|" + plan.model_type + "|" + std::to_string(plan.num_hidden_layers) + "|" +
        std::to_string(plan.hidden_size) + "|" + std::to_string(plan.expert_intermediate_size) + "|" +
        std::to_string(plan.num_experts) + "|" + std::string(expert_layout_name(plan.layout)));
    add("router " + describe_router(plan.router) + (plan.router.bf16_logits ? " bf16" : " f32"));
    // Only where it is not silu, so the plans of every earlier family keep their digest.
    if (plan.expert_activation.kind != GatedActivationKind::silu) add("activation " + describe_activation(plan.expert_activation));
    for (const auto& layer : plan.moe_layers) add(std::to_string(layer.layer) + "|" + layer.router_weight + "|" + layer.router_bias);
    for (const auto& layer : plan.moe_layers)
        for (const auto& e : layer.experts)
            for (const auto& s : e.weights) {
                std::string line = std::to_string(layer.layer) + "|" + std::to_string(e.expert) + "|" + s.tensor + "|" +
                                   std::to_string(s.rows) + "x" + std::to_string(s.cols);
                if (s.slice)
                    line += "|" + std::to_string(s.slice->expert) + "," + std::to_string(s.slice->offset) + "," +
                            std::to_string(s.slice->length) + "," + std::to_string(s.slice->step) + "," +
                            std::to_string(s.slice->along_columns) + "," + std::to_string(s.slice->transposed);
                line += "|" + encoding_line(source.weight(s.tensor));
                add(line);
            }
    for (const auto& [name, role] : plan.roles) add(name + "=" + std::string(tensor_role_name(role)));
    return d.hex();
}

RunManifest describe_source(const Checkpoint& source, const ModelPlan& plan) {
    RunManifest m;
    m.tool_version = MOEQUANT_VERSION_STRING;
    m.source_fingerprint = source_fingerprint(source);
    m.source_shards = source_shard_records(source);
    m.plan_digest = plan_digest(plan, source);
    return m;
}

}  // namespace moequant
