#include "synth_writer.hpp"

#include "synth_encoded_linear.hpp"
#include "synth_random.hpp"
#include "synth_statistics.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/output_file.hpp>
#include <moequant/sharded_writer.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>

namespace moequant::adapters {
namespace {

namespace json = boost::json;

// One tensor as it lands in a shard (an FP8 weight and its scale are two of these).
struct Placed {
    std::size_t source;  // index into SynthModel::tensors
    bool is_scale;
    TensorSpec spec;
    std::size_t shard = 0;
};


std::vector<Placed> expand(const SynthModel& model) {
    std::vector<Placed> out;
    for (std::size_t i = 0; i < model.tensors.size(); ++i) {
        const SynthTensor& t = model.tensors[i];
        if (t.dtype != DType::F8_E4M3) {
            out.push_back({i, false, {t.name, t.dtype, t.shape}});
            continue;
        }
        const auto specs = encoded_linear_specs(t.encoding.value_or(model.encoding), model.fp8_block, t.name, t.shape);
        for (std::size_t k = 0; k < specs.size(); ++k) out.push_back({i, k > 0, specs[k]});
    }
    return out;
}

std::uint64_t bytes_of(const TensorSpec& s) {
    return dtype_byte_size(s.dtype, shape_elements(s.shape).value_or(0)).value_or(0);
}

// Contiguous runs of roughly equal bytes, then one scale moved past its weight's shard so that
// readers must look every tensor up on its own (as with DeepSeek-V3's published shards).
void assign_shards(std::vector<Placed>& placed, std::size_t shards) {
    std::uint64_t total = 0;
    for (const auto& p : placed) total += bytes_of(p.spec);
    std::uint64_t running = 0;
    for (auto& p : placed) {
        p.shard = std::min<std::size_t>(shards - 1, static_cast<std::size_t>(running * shards / std::max<std::uint64_t>(total, 1)));
        running += bytes_of(p.spec);
    }
    if (shards < 2) return;
    for (std::size_t i = 0; i + 1 < placed.size(); ++i) {
        Placed& weight = placed[i];
        Placed& scale = placed[i + 1];
        if (!weight.is_scale && scale.is_scale && weight.shard == scale.shard && weight.shard + 1 < shards &&
            weight.spec.name.find(".experts.") != std::string::npos) {
            scale.shard = weight.shard + 1;
            return;
        }
    }
}

std::vector<float> values_of(const SynthTensor& t, const SynthSettings& settings) {
    const std::size_t n = static_cast<std::size_t>(shape_elements(t.shape).value_or(0));
    std::vector<float> v(n);
    SynthRandom random(settings.seed, t.name);
    const bool trained = settings.trained_statistics;
    switch (t.fill) {
        case SynthFill::embedding:
            if (trained && t.shape.size() == 2) return low_rank_embeddings(random, t.shape[0], t.shape[1], t.scale);
            [[fallthrough]];
        case SynthFill::normal:
            for (auto& x : v) x = static_cast<float>(t.scale * random.normal());
            break;
        case SynthFill::norm_gain:
            if (trained) {
                for (auto& x : v) x = static_cast<float>(trained_norm_gain(random));
                break;
            }
            [[fallthrough]];
        case SynthFill::ones:
            for (auto& x : v) x = static_cast<float>(1.0 + t.scale * random.normal());
            break;
        case SynthFill::zeros:
            break;
        case SynthFill::inv_freq:
            for (std::size_t i = 0; i < n; ++i)
                v[i] = static_cast<float>(1.0 / std::pow(t.scale, static_cast<double>(2 * i) / static_cast<double>(2 * n)));
            break;
    }
    return v;
}


void pretty(const json::value& v, std::string& out, int indent) {
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    switch (v.kind()) {
        case json::kind::object: {
            const auto& o = v.get_object();
            if (o.empty()) {
                out += "{}";
                return;
            }
            out += "{\n";
            std::vector<const json::key_value_pair*> members;
            for (const auto& kv : o) members.push_back(&kv);
            std::sort(members.begin(), members.end(), [](auto* a, auto* b) { return a->key() < b->key(); });
            bool first = true;
            for (const auto* kv : members) {
                if (!first) out += ",\n";
                first = false;
                out += pad + json::serialize(json::value(kv->key())) + ": ";
                pretty(kv->value(), out, indent + 2);
            }
            out += "\n" + std::string(static_cast<std::size_t>(indent), ' ') + "}";
            return;
        }
        case json::kind::array: {
            const auto& a = v.get_array();
            if (a.empty()) {
                out += "[]";
                return;
            }
            out += "[\n";
            for (std::size_t i = 0; i < a.size(); ++i) {
                if (i) out += ",\n";
                out += pad;
                pretty(a[i], out, indent + 2);
            }
            out += "\n" + std::string(static_cast<std::size_t>(indent), ' ') + "]";
            return;
        }
        case json::kind::double_: {
            // Python's float repr, which transformers' configs carry: shortest round trip, and
            // a ".0" on whole numbers (Boost.JSON would write 0.0 as "0E0").
            char buf[32];
            auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v.get_double());
            std::string text(buf, end);
            if (text.find_first_of(".en") == std::string::npos) text += ".0";
            out += text;
            return;
        }
        default:
            out += json::serialize(v);
    }
}

// A shard of `specs` whose data is all zeros, left as a hole: the header is written and the file
// extended to its full size by its last byte, so the file system allocates next to nothing.
void write_sparse_shard(const std::filesystem::path& path, std::vector<TensorSpec> specs) {
    const auto [header, layout] = plan_safetensors_layout(std::move(specs), default_safetensors_metadata());
    const std::uint64_t data_start = 8 + header.size(), end = data_start + (layout.empty() ? 0 : layout.back().end);
    OutputFile file(path);  // no space reserved: the point is not to take it
    unsigned char prefix[8];
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
    file.append(std::as_bytes(std::span<const unsigned char>(prefix, 8)));
    file.append(header);
    if (end > data_start) {
        const std::byte zero{0};
        file.write_at(end - 1, std::span(&zero, 1));
    }
    file.commit();
}

}  // namespace


json::object base_config(std::int64_t vocab_size, std::int64_t bos_token_id, std::int64_t eos_token_id,
                         SynthEncoding encoding) {
    json::object c{{"attention_dropout", 0.0},        {"hidden_act", "silu"},       {"initializer_range", 0.02},
                   {"tie_word_embeddings", false},    {"torch_dtype", "bfloat16"},  {"transformers_version", "4.57.1"},
                   {"use_cache", true},               {"vocab_size", vocab_size}};
    if (bos_token_id >= 0) c["bos_token_id"] = bos_token_id;
    if (eos_token_id >= 0) c["eos_token_id"] = eos_token_id;
    if (auto q = quantization_config(encoding); !q.is_null()) c["quantization_config"] = std::move(q);
    if (encoding == SynthEncoding::mxfp4) c["expert_dtype"] = "fp4";
    return c;
}

std::string pretty_json(const json::value& value) {
    std::string out;
    pretty(value, out, 0);
    return out + "\n";
}

std::string padded_shard_name(std::size_t number, std::size_t count, int number_digits, int count_digits) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "model-%0*zu-of-%0*zu.safetensors", number_digits, number, count_digits, count);
    return buf;
}

std::string unpadded_shard_name(std::size_t number, std::size_t count) {
    return "model-" + std::to_string(number) + "-of-" + std::to_string(count) + ".safetensors";
}

SynthSettings read_synth_settings(const Options& options, const std::vector<std::string>& model_types,
                                  const std::vector<std::string>& layouts, const std::vector<SynthRelease>& releases,
                                  const std::vector<std::string>& full_size_types) {
    auto one_of = [](const std::string& option, const std::string& value, const std::vector<std::string>& allowed) {
        if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        throw_usage_error(option + " '" + value + "' is not one of: " + list);
    };
    SynthSettings s;
    s.release = options.get_string("release", "");
    const SynthRelease* release = nullptr;
    if (!s.release.empty()) {
        std::vector<std::string> names;
        for (const SynthRelease& r : releases) {
            names.push_back(r.name);
            if (r.name == s.release) release = &r;
        }
        if (names.empty()) throw_usage_error("release '" + s.release + "': this family synthesizes no named release");
        one_of("release", s.release, names);
    }
    s.model_type = options.get_string("model_type", release ? release->model_type : model_types.front());
    one_of("model_type", s.model_type, model_types);
    if (release && release->model_type != s.model_type)
        throw_usage_error("release '" + s.release + "' has model_type '" + release->model_type + "', not '" + s.model_type + "'");
    std::string preset = options.get_string("preset", "tiny");
    one_of("--preset", preset, {"tiny", "small", "full"});
    s.small = preset == "small";
    s.full = preset == "full";
    if (s.full && std::find(full_size_types.begin(), full_size_types.end(), s.model_type) == full_size_types.end()) {
        std::string list;
        for (const auto& t : full_size_types) list += (list.empty() ? "" : ", ") + t;
        throw_usage_error("--preset full is not available for model_type '" + s.model_type + "'" +
                          (list.empty() ? std::string(": this family has no full-size preset") : "; it is for: " + list));
    }
    std::string dtype = options.get_string("dtype", "bf16");
    one_of("--dtype", dtype, {"bf16", "fp16", "fp8", "fp8-channel", "int4-ct", "mxfp4", "mxfp8", "gptq", "awq"});
    s.float16 = dtype == "fp16";
    s.encoding = dtype == "fp8"           ? SynthEncoding::fp8_block
                 : dtype == "fp8-channel" ? SynthEncoding::fp8_channel
                 : dtype == "int4-ct"     ? SynthEncoding::int4_ct
                 : dtype == "mxfp4"       ? SynthEncoding::mxfp4
                 : dtype == "mxfp8"       ? SynthEncoding::mxfp8
                 : dtype == "gptq"        ? SynthEncoding::gptq
                 : dtype == "awq"         ? SynthEncoding::awq
                                          : SynthEncoding::bf16;
    s.fp8 = s.encoding != SynthEncoding::bf16;
    std::int64_t seed = options.get_int("seed", 42);
    if (seed < 0) throw_usage_error("--seed must not be negative");
    s.seed = static_cast<std::uint64_t>(seed);
    s.layout = options.get_string("layout", layouts.front());
    one_of("--layout", s.layout, layouts);
    const std::string statistics = options.get_string("statistics", "iid");
    one_of("--statistics", statistics, {"iid", "trained"});
    s.trained_statistics = statistics == "trained";
    return s;
}

void write_synth_model(const SynthModel& model, const std::filesystem::path& directory, const SynthSettings& settings) {
    const std::uint64_t seed = settings.seed;
    // Config and side files first: the index, written last, marks the checkpoint complete.
    boost::json::value config = model.config;
    if (settings.float16)
        for (auto* c : {config.if_object(), config.is_object() && config.as_object().contains("text_config")
                                                 ? config.as_object().at("text_config").if_object() : nullptr})
            if (c && c->contains("torch_dtype")) (*c)["torch_dtype"] = "float16";
    write_file_atomically(directory / "config.json", pretty_json(config));
    for (const auto& [name, content] : model.side_files) write_file_atomically(directory / name, content);

    std::vector<Placed> placed = expand(model);
    if (settings.float16)
        for (auto& p : placed)
            if (p.spec.dtype == DType::BF16 && !model.tensors[p.source].bytes) p.spec.dtype = DType::F16;
    assign_shards(placed, std::max<std::size_t>(1, model.shard_count));
    ShardedSafetensorsWriter sharded(directory);
    for (std::size_t shard = 0; shard < std::max<std::size_t>(1, model.shard_count); ++shard) {
        std::vector<TensorSpec> specs;
        for (const auto& p : placed)
            if (p.shard == shard) specs.push_back(p.spec);
        const std::string name = model.shard_name(shard + 1, model.shard_count);
        if (settings.full) {  // every value zero: nothing to compute or write
            write_sparse_shard(directory / name, std::move(specs));
            sharded.adopt_shard(name);
            continue;
        }
        SafetensorsWriter writer = sharded.open_shard(name, specs);
        for (const auto& p : placed) {
            if (p.shard != shard) continue;
            const SynthTensor& t = model.tensors[p.source];
            std::vector<float> values = t.bytes ? std::vector<float>{} : values_of(t, settings);
            std::vector<std::uint8_t> bytes;
            if (t.bytes) {
                bytes = t.bytes(seed);
            } else if (t.dtype == DType::F8_E4M3 && settings.float16) {  // a marked linear of an fp16 release
                bytes = f16_bytes(values);
            } else if (t.dtype == DType::F8_E4M3) {
                bytes = encoded_linear_bytes(t.encoding.value_or(model.encoding), model.fp8_block, t.shape, p.spec, values,
                                             model.fp8_power_of_two_scales);
            } else if (t.dtype == DType::BF16) {
                bytes = p.spec.dtype == DType::F16 ? f16_bytes(values) : bf16_bytes(values);
            } else if (t.dtype == DType::F32) {
                bytes = f32_bytes(values);
            } else {
                throw Error(ErrorKind::internal, "synth cannot fill dtype " + std::string(dtype_name(t.dtype)),
                            {.tensor = t.name});
            }
            writer.write(p.spec.name, std::as_bytes(std::span<const std::uint8_t>(bytes)));
        }
        writer.finish();
    }
    sharded.write_index();
}

}  // namespace moequant::adapters
