#include "synth_writer.hpp"

#include "synth_int4.hpp"
#include "synth_random.hpp"

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

Shape scale_shape(const Shape& weight, BlockSize block) {
    return {(weight[0] + block.rows - 1) / block.rows, (weight[1] + block.cols - 1) / block.cols};
}

// The block the synthetic FP8 scales cover: the config's block, or one row per channel.
BlockSize fp8_scale_block(const SynthModel& model, const Shape& weight) {
    return model.encoding == SynthEncoding::fp8_channel ? BlockSize{1, weight[1]} : model.fp8_block;
}

// Kimi-K2 packs only its routed experts (the config's ignore list keeps the rest BF16).
bool is_routed_expert(const std::string& name) { return name.find(".experts.") != std::string::npos; }

constexpr std::int64_t int4_group = 32;

// `<stem>.<suffix>` of a `<stem>.weight`.
std::string sibling(const std::string& weight, const std::string& suffix) {
    return weight.substr(0, weight.size() - std::string(".weight").size()) + suffix;
}

// `<stem>.input_scale` of a `<stem>.weight`.
std::string input_scale_name(const std::string& weight) {
    return weight.substr(0, weight.size() - std::string(".weight").size()) + ".input_scale";
}

std::vector<Placed> expand(const SynthModel& model) {
    std::vector<Placed> out;
    for (std::size_t i = 0; i < model.tensors.size(); ++i) {
        const SynthTensor& t = model.tensors[i];
        if (t.dtype == DType::F8_E4M3) {
            if (t.shape.size() != 2)
                throw Error(ErrorKind::internal, "FP8 synth tensors must be 2-D", {.tensor = t.name});
            if (model.encoding == SynthEncoding::int4_ct) {
                if (!is_routed_expert(t.name)) {
                    out.push_back({i, false, {t.name, DType::BF16, t.shape}});
                } else {
                    out.push_back({i, false, {sibling(t.name, ".weight_packed"), DType::I32, {t.shape[0], t.shape[1] / 8}}});
                    out.push_back({i, true, {sibling(t.name, ".weight_scale"), DType::BF16, {t.shape[0], t.shape[1] / int4_group}}});
                    out.push_back({i, true, {sibling(t.name, ".weight_shape"), DType::I64, {2}}});
                }
                continue;
            }
            out.push_back({i, false, {t.name, DType::F8_E4M3, t.shape}});
            if (model.encoding == SynthEncoding::fp8_channel) {
                out.push_back({i, true, {t.name + "_scale", DType::BF16, {t.shape[0], 1}}});
                if (t.name.ends_with(".weight")) out.push_back({i, true, {input_scale_name(t.name), DType::F32, {1}}});
            } else {
                out.push_back({i, true, {t.name + "_scale_inv", DType::F32, scale_shape(t.shape, model.fp8_block)}});
            }
        } else {
            out.push_back({i, false, {t.name, t.dtype, t.shape}});
        }
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

std::vector<std::uint8_t> bf16_bytes(const std::vector<float>& values) {
    std::vector<std::uint8_t> out(values.size() * 2);
    for (std::size_t i = 0; i < values.size(); ++i) {
        std::uint16_t b = f32_to_bf16(values[i]);
        std::memcpy(out.data() + 2 * i, &b, 2);
    }
    return out;
}

std::vector<std::uint8_t> f32_bytes(const std::vector<float>& values) {
    std::vector<std::uint8_t> out(values.size() * 4);
    if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
    return out;
}

std::vector<float> values_of(const SynthTensor& t, std::uint64_t seed) {
    const std::size_t n = static_cast<std::size_t>(shape_elements(t.shape).value_or(0));
    std::vector<float> v(n);
    SynthRandom random(seed, t.name);
    switch (t.fill) {
        case SynthFill::normal:
            for (auto& x : v) x = static_cast<float>(t.scale * random.normal());
            break;
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

// DeepSeek-style weight quantization: per block s = max(amax, 1e-4) / 448 in float32, codes =
// e4m3(w / s); the stored weight_scale_inv is s (multiply to dequantize).
std::pair<std::vector<std::uint8_t>, std::vector<float>> quantize_fp8(const std::vector<float>& w, const Shape& shape,
                                                                      BlockSize block) {
    const std::int64_t rows = shape[0], cols = shape[1];
    const Shape sshape = scale_shape(shape, block);
    std::vector<float> scales(static_cast<std::size_t>(sshape[0] * sshape[1]));
    std::vector<std::uint8_t> codes(w.size());
    for (std::int64_t br = 0; br < sshape[0]; ++br)
        for (std::int64_t bc = 0; bc < sshape[1]; ++bc) {
            const std::int64_t r0 = br * block.rows, r1 = std::min(rows, r0 + block.rows);
            const std::int64_t c0 = bc * block.cols, c1 = std::min(cols, c0 + block.cols);
            float amax = 0;
            for (std::int64_t r = r0; r < r1; ++r)
                for (std::int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[static_cast<std::size_t>(r * cols + c)]));
            const float s = std::max(amax, 1e-4f) / 448.0f;
            scales[static_cast<std::size_t>(br * sshape[1] + bc)] = s;
            for (std::int64_t r = r0; r < r1; ++r)
                for (std::int64_t c = c0; c < c1; ++c) {
                    const auto i = static_cast<std::size_t>(r * cols + c);
                    codes[i] = f32_to_f8_e4m3(w[i] / s);
                }
        }
    return {std::move(codes), std::move(scales)};
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

}  // namespace

json::value quantization_config(SynthEncoding encoding) {
    switch (encoding) {
        case SynthEncoding::bf16: return nullptr;
        case SynthEncoding::fp8_block:
            return json::object{{"activation_scheme", "dynamic"},
                                {"fmt", "e4m3"},
                                {"quant_method", "fp8"},
                                {"weight_block_size", json::array{128, 128}}};
        case SynthEncoding::int4_ct: {
            json::object weights{{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"},
                                 {"group_size", int4_group}, {"dynamic", false}, {"actorder", nullptr}, {"observer", "minmax"}};
            json::object group{{"targets", json::array{"Linear"}}, {"weights", std::move(weights)},
                               {"input_activations", nullptr}, {"output_activations", nullptr}};
            return json::object{{"quant_method", "compressed-tensors"},
                                {"format", "pack-quantized"},
                                {"quantization_status", "compressed"},
                                {"config_groups", json::object{{"group_0", std::move(group)}}},
                                {"ignore", json::array{"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                                                       "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"}},
                                {"kv_cache_scheme", nullptr}};
        }
        case SynthEncoding::fp8_channel: {
            json::object weights{{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "channel"},
                                 {"dynamic", false}, {"group_size", nullptr}, {"actorder", nullptr}, {"observer", "minmax"}};
            json::object inputs{{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "tensor"},
                                {"dynamic", false}, {"observer", "minmax"}};
            json::object group{{"targets", json::array{"Linear"}}, {"weights", std::move(weights)},
                               {"input_activations", std::move(inputs)}, {"output_activations", nullptr}};
            return json::object{{"quant_method", "compressed-tensors"},
                                {"format", "float-quantized"},
                                {"quantization_status", "compressed"},
                                {"config_groups", json::object{{"group_0", std::move(group)}}},
                                {"ignore", json::array{"lm_head"}},
                                {"kv_cache_scheme", nullptr}};
        }
    }
    return nullptr;
}

json::object base_config(std::int64_t vocab_size, std::int64_t bos_token_id, std::int64_t eos_token_id,
                         SynthEncoding encoding) {
    json::object c{{"attention_dropout", 0.0},        {"hidden_act", "silu"},       {"initializer_range", 0.02},
                   {"tie_word_embeddings", false},    {"torch_dtype", "bfloat16"},  {"transformers_version", "4.57.1"},
                   {"use_cache", true},               {"vocab_size", vocab_size}};
    if (bos_token_id >= 0) c["bos_token_id"] = bos_token_id;
    if (eos_token_id >= 0) c["eos_token_id"] = eos_token_id;
    if (encoding != SynthEncoding::bf16) c["quantization_config"] = quantization_config(encoding);
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
                                  const std::vector<std::string>& layouts) {
    auto one_of = [](const std::string& option, const std::string& value, const std::vector<std::string>& allowed) {
        if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        throw_usage_error(option + " '" + value + "' is not one of: " + list);
    };
    SynthSettings s;
    s.model_type = options.get_string("model_type", model_types.front());
    one_of("model_type", s.model_type, model_types);
    std::string preset = options.get_string("preset", "tiny");
    one_of("--preset", preset, {"tiny", "small"});
    s.small = preset == "small";
    std::string dtype = options.get_string("dtype", "bf16");
    one_of("--dtype", dtype, {"bf16", "fp8", "fp8-channel", "int4-ct"});
    s.encoding = dtype == "fp8"           ? SynthEncoding::fp8_block
                 : dtype == "fp8-channel" ? SynthEncoding::fp8_channel
                 : dtype == "int4-ct"     ? SynthEncoding::int4_ct
                                          : SynthEncoding::bf16;
    s.fp8 = s.encoding != SynthEncoding::bf16;
    std::int64_t seed = options.get_int("seed", 42);
    if (seed < 0) throw_usage_error("--seed must not be negative");
    s.seed = static_cast<std::uint64_t>(seed);
    s.layout = options.get_string("layout", layouts.front());
    one_of("--layout", s.layout, layouts);
    return s;
}

void write_synth_model(const SynthModel& model, const std::filesystem::path& directory, std::uint64_t seed) {
    // Config and side files first: the index, written last, marks the checkpoint complete.
    write_file_atomically(directory / "config.json", pretty_json(model.config));
    for (const auto& [name, content] : model.side_files) write_file_atomically(directory / name, content);

    std::vector<Placed> placed = expand(model);
    assign_shards(placed, std::max<std::size_t>(1, model.shard_count));
    ShardedSafetensorsWriter sharded(directory);
    for (std::size_t shard = 0; shard < std::max<std::size_t>(1, model.shard_count); ++shard) {
        std::vector<TensorSpec> specs;
        for (const auto& p : placed)
            if (p.shard == shard) specs.push_back(p.spec);
        SafetensorsWriter writer = sharded.open_shard(model.shard_name(shard + 1, model.shard_count), specs);
        for (const auto& p : placed) {
            if (p.shard != shard) continue;
            const SynthTensor& t = model.tensors[p.source];
            std::vector<float> values = values_of(t, seed);
            std::vector<std::uint8_t> bytes;
            if (t.dtype == DType::F8_E4M3 && p.spec.dtype == DType::BF16 && !p.is_scale) {
                bytes = bf16_bytes(values);  // a marked linear the encoding leaves unquantized
            } else if (t.dtype == DType::F8_E4M3 && model.encoding == SynthEncoding::int4_ct) {
                if (p.spec.name.ends_with(".weight_shape")) {
                    const std::int64_t dims[2] = {t.shape[0], t.shape[1]};
                    bytes.assign(reinterpret_cast<const std::uint8_t*>(dims), reinterpret_cast<const std::uint8_t*>(dims) + 16);
                } else {
                    PackedInt4 packed = pack_int4_groups(values, t.shape, int4_group);
                    bytes = p.is_scale ? std::move(packed.scales) : std::move(packed.words);
                }
            } else if (t.dtype == DType::F8_E4M3) {
                auto [codes, scales] = quantize_fp8(values, t.shape, fp8_scale_block(model, t.shape));
                if (!p.is_scale) bytes = std::move(codes);
                else if (p.spec.name.ends_with(".input_scale")) bytes = f32_bytes({0.0125f});  // never read
                else if (p.spec.dtype == DType::BF16) bytes = bf16_bytes(scales);
                else bytes = f32_bytes(scales);
            } else if (t.dtype == DType::BF16) {
                bytes = bf16_bytes(values);
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
