#include "gguf_plan.hpp"

#include "gguf_packing.hpp"
#include "gguf_rope_interleave.hpp"
#include "gguf_tiktoken_vocab.hpp"
#include "gguf_vocab.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>

namespace moequant::formats {
namespace {

using namespace ggml_type_id;
namespace fs = std::filesystem;

constexpr std::uint32_t quantization_version = 2;  // GGML_QNT_VERSION

// What llama.cpp's converter writes a non-expert tensor in before llama-quantize sees it: F32
// for 1-D tensors, norms, routers, convolutions, the DSA indexer's head weights, MiniMax-M3's
// indexer projections and anything not named ".weight"; BF16 otherwise (only the
// first kind keeps its type: llama-quantize quantizes the others).
std::uint32_t converter_type(const std::string& name, const std::vector<std::int64_t>& ne) {
    const bool weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    auto has = [&](std::string_view part) { return name.find(part) != std::string::npos; };
    if (ne.size() < 2 || !weight || has("_norm.weight") || has("ffn_gate_inp") || has("ssm_conv1d") || has("indexer.proj.weight") ||
        has("indexer.q_proj.weight") || has("indexer.k_proj.weight"))
        return f32;
    return bf16;
}

// DeepseekV4Model.tensor_force_quant, with TextModel's rule after it: the type follows what the
// checkpoint stores, whatever the outtype — block FP8 dequantized and written Q8_0 (F16 where rows
// are not whole Q8_0 blocks, as gguf-py falls back), F32 kept F32, BF16 matrices BF16, an integer
// table I32 —, and 1-D tensors and norms F32.
GgufTensorType source_following_type(const Checkpoint& source, const std::string& weight, const std::string& gguf,
                                     const std::vector<std::int64_t>& ne) {
    GgufTensorType t{.name = gguf, .ne = ne, .source_type = converter_type(gguf, ne), .forced = true};
    // The hash-routing table is the one integer tensor (DeepseekV4Model writes it apart).
    const bool table = gguf.ends_with("ffn_gate_tid2eid.weight");
    const TensorInfo& stored = source.info(weight);
    if (table != (stored.dtype == DType::I64 || stored.dtype == DType::I32))
        throw Error(ErrorKind::input,
                    table ? "is " + std::string(dtype_name(stored.dtype)) + "; the hash-routing table must be I64 or I32"
                          : "is " + std::string(dtype_name(stored.dtype)) + "; llama.cpp's deepseek4 reads integers only in the hash-routing table",
                    {.tensor = weight, .code = "UnsupportedDtype"});
    if (table) {
        t.source_type = i32;
        return t;
    }
    if (ne.size() < 2 || gguf.find("_norm.weight") != std::string::npos) {
        t.source_type = f32;
        return t;
    }
    if (const EncodedWeight* w = source.weight_holding(weight); w && (w->encoding == "fp8" || w->tensors.size() > 1)) {
        if (w->encoding == "fp8") t.source_type = ne[0] % 32 == 0 ? q8_0 : f16;
        else t.forced = false;  // another encoding: what the converter would make of it is not known
        return t;
    }
    switch (stored.dtype) {
    case DType::F32: t.source_type = f32; break;
    case DType::BF16: t.source_type = bf16; break;
    default: t.forced = false;
    }
    return t;
}

}  // namespace

std::vector<std::int32_t> gguf_index_table(const Checkpoint& source, const std::string& name, std::int64_t limit) {
    const TensorView v = source.view(name);
    if (v.dtype != DType::I64 && v.dtype != DType::I32)
        throw Error(ErrorKind::input, "is " + std::string(dtype_name(v.dtype)) + "; an index table must be I64 or I32",
                    {.tensor = name, .code = "UnsupportedDtype"});
    const auto* data = static_cast<const std::byte*>(v.data());
    std::vector<std::int32_t> out(v.elements());
    for (std::size_t i = 0; i < out.size(); ++i) {
        std::int64_t x = 0;
        if (v.dtype == DType::I64) {
            std::memcpy(&x, data + i * 8, 8);
        } else {
            std::int32_t narrow = 0;
            std::memcpy(&narrow, data + i * 4, 4);
            x = narrow;
        }
        if (x < 0 || x >= limit)
            throw Error(ErrorKind::input,
                        "holds " + std::to_string(x) + " at element " + std::to_string(i) + "; expert indices run 0.." + std::to_string(limit - 1),
                        {.tensor = name, .code = "BadIndexTable"});
        out[i] = static_cast<std::int32_t>(x);
    }
    return out;
}

namespace {

std::vector<std::int64_t> ggml_dims(const Shape& shape) { return {shape.rbegin(), shape.rend()}; }

// ggml_n_dims: trailing dimensions of 1 do not count (one dimension at least).
void drop_trailing_unit_dims(std::vector<std::int64_t>& ne) {
    while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
}

// The shape of what `transform` makes of a weight of `shape`: its rows and columns taken, its
// dimensions of 1 dropped.
Shape transformed_shape(const Shape& shape, const GgufTensorTransform& transform) {
    Shape out = shape;
    if (!transform.rows.empty()) out = {static_cast<std::int64_t>(transform.rows.size()), shape.back()};
    if (!transform.cols.empty()) out.back() = static_cast<std::int64_t>(transform.cols.size());
    if (transform.squeeze) {
        std::erase(out, 1);
        if (out.empty()) out = {1};
    }
    return out;
}

// Error(input) naming the checkpoint tensor when the GGUF tensor `gguf` it becomes would not have
// the dims llama.cpp's loader creates it with: the experts' biases {rows, experts} (gpt-oss), the
// attention sinks {heads}, DeepSeek-V4's hash-routing table {experts per token, vocabulary}.
void check_gguf_dims(const std::string& weight, const std::string& gguf, const std::vector<std::int64_t>& ne, const ModelPlan& plan,
                     const ModelConfig& config) {
    std::vector<std::int64_t> expected;
    if (gguf.ends_with(".ffn_gate_exps.bias") || gguf.ends_with(".ffn_up_exps.bias"))
        expected = {plan.expert_intermediate_size, plan.num_experts};
    else if (gguf.ends_with(".ffn_down_exps.bias")) expected = {plan.hidden_size, plan.num_experts};
    else if (gguf.ends_with(".attn_sinks.weight")) expected = {config.require_int("num_attention_heads")};
    else if (gguf.ends_with(".ffn_gate_tid2eid.weight")) expected = {config.require_int("num_experts_per_tok"), config.require_int("vocab_size")};
    else return;
    if (ne == expected) return;
    auto dims = [](const std::vector<std::int64_t>& d) {
        std::string text;
        for (auto n : d) text += (text.empty() ? "" : ", ") + std::to_string(n);
        return "{" + text + "}";
    };
    throw Error(ErrorKind::input, "would be GGUF " + gguf + " of dims " + dims(ne) + "; llama.cpp loads it as " + dims(expected),
                {.tensor = weight, .code = "BadGgufShape"});
}

GgufTypeRequest type_request(const Options& options) {
    const std::string preset_name = options.get_string("preset", "");
    const auto preset = gguf_preset_named(preset_name);
    if (!preset) {
        std::string names;
        for (const auto& n : gguf_preset_names()) names += (names.empty() ? "" : ", ") + n;
        throw Error(ErrorKind::usage, "GGUF output needs a llama-quantize preset, got '" + preset_name + "'",
                    {.code = "BadGgufPreset", .hint = "--quant-method one of " + names});
    }
    GgufTypeRequest request{.preset = *preset};
    const std::string list = options.get_string("tensor_types", "");  // "PATTERN=TYPE;PATTERN=TYPE"
    for (std::size_t at = 0, cut; at < list.size(); at = cut + 1) {
        cut = std::min(list.find(';', at), list.size());
        if (cut > at) request.overrides.push_back(parse_tensor_type_override(list.substr(at, cut - at)));
    }
    auto type_option = [&](const char* key) -> std::optional<std::uint32_t> {
        const auto value = options.get(key);
        if (!value) return std::nullopt;
        const auto type = ggml_type_named_id(*value);
        if (!type || *type == i32) throw Error(ErrorKind::usage, "--" + std::string(key) + " '" + *value + "' is no GGUF type moequant writes");
        return type;
    };
    request.output_type = type_option("output-tensor-type");
    request.token_embedding_type = type_option("token-embedding-type");
    request.pure = options.get_bool("pure", false);
    request.leave_output = options.get_bool("leave-output-tensor", false);
    return request;
}

// Whether the plan's expert matrices are stored in MXFP4 (the first expert's stand for all: the
// gguf quantizer's carrier checks every one).
bool stores_mxfp4_experts(const Checkpoint& source, const ModelPlan& plan) {
    if (plan.moe_layers.empty()) return false;
    const EncodedWeight* w = source.find_weight(plan.moe_layers.front().experts.front().weights[0].tensor);
    return w && w->encoding == "mxfp4";
}

// What llama-quantize records of the importance matrix it used (its kv overrides: strings cut to
// 127 bytes, counts as i32, the chunk count only when known).
std::vector<GgufKeyValue> imatrix_metadata(const ImatrixFile& imatrix, const std::string& given_path) {
    std::vector<GgufKeyValue> kv{{"quantize.imatrix.file", GgufValue::string(given_path.substr(0, 127))}};
    if (!imatrix.datasets().empty() && !imatrix.datasets().front().empty())
        kv.push_back({"quantize.imatrix.dataset", GgufValue::string(imatrix.datasets().front().substr(0, 127))});
    kv.push_back({"quantize.imatrix.entries_count", GgufValue::i32(static_cast<std::int32_t>(imatrix.entries()))});
    if (imatrix.chunk_count() > 0)
        kv.push_back({"quantize.imatrix.chunks_count", GgufValue::i32(static_cast<std::int32_t>(imatrix.chunk_count()))});
    return kv;
}

std::vector<GgufKeyValue> general_metadata(const GgufArchitecture& arch, const GgufPreset& preset) {
    return {
        {"general.architecture", GgufValue::string(arch.arch)},
        {"general.type", GgufValue::string("model")},
        {"general.quantization_version", GgufValue::u32(quantization_version)},
        {"general.file_type", GgufValue::u32(preset.file_type)},
    };
}

// In llama-gguf-split's order (it sets split.count last, once it knows it), so its parts of a
// model.gguf and ours are the same bytes.
void add_split_keys(std::vector<GgufKeyValue>& kv, std::size_t index, std::size_t count, std::size_t tensors) {
    kv.push_back({"split.no", GgufValue::u16(static_cast<std::uint16_t>(index))});
    kv.push_back({"split.tensors.count", GgufValue::i32(static_cast<std::int32_t>(tensors))});
    kv.push_back({"split.count", GgufValue::u16(static_cast<std::uint16_t>(count))});
}

// One file of `tensors`, its header holding `metadata`.
GgufSplit lay_out_file(std::string name, std::vector<GgufPlannedTensor> tensors, const std::vector<GgufKeyValue>& metadata) {
    GgufSplit split{.name = std::move(name), .tensors = std::move(tensors)};
    std::vector<GgufTensorInfo> infos;
    for (const auto& t : split.tensors) infos.push_back(t.info);
    split.layout = lay_out_gguf(metadata, infos);
    for (std::size_t k = 0; k < split.tensors.size(); ++k) split.tensors[k].info.offset = split.layout.tensors[k].offset;
    return split;
}

// gguf-split's parts of `groups` (the metadata in the first, the split keys in each).
std::vector<GgufSplit> lay_out_parts(const std::vector<std::vector<GgufPlannedTensor>>& groups, const std::vector<GgufKeyValue>& metadata,
                                     std::size_t tensor_count) {
    if (groups.size() > std::numeric_limits<std::uint16_t>::max())
        throw Error(ErrorKind::usage, "the GGUF output would have " + std::to_string(groups.size()) + " parts; gguf-split counts at most 65535",
                    {.code = "BadSplitSize", .hint = "a larger --split-max-size or --split-max-tensors"});
    std::vector<GgufSplit> parts;
    for (std::size_t i = 0; i < groups.size(); ++i) {
        std::vector<GgufKeyValue> kv = i == 0 ? metadata : std::vector<GgufKeyValue>{};
        add_split_keys(kv, i, groups.size(), tensor_count);
        parts.push_back(lay_out_file(gguf_split_name(i, groups.size()), groups[i], kv));
    }
    return parts;
}

// The output's files, and the file each MoE layer's experts are written to as it completes.
void lay_out_files(GgufPlan& out, const ModelPlan& plan, const std::map<std::string, GgufPlannedTensor>& by_name,
                   const std::vector<GgufKeyValue>& metadata, const GgufPacking& packing) {
    std::vector<std::vector<GgufPlannedTensor>> groups(1);
    if (!packing.packed()) {
        // The first part holds the metadata and every non-expert tensor, then one per MoE layer.
        for (const auto& [name, t] : by_name)
            if (t.layer < 0) groups[0].push_back(t);
        for (const auto& layer : plan.moe_layers) {
            groups.emplace_back();
            for (Projection p : expert_projections) groups.back().push_back(by_name.at(gguf_expert_tensor_name(layer.layer, p)));
        }
        out.splits = lay_out_parts(groups, metadata, by_name.size());
        for (std::size_t i = 0; i < plan.moe_layers.size(); ++i) out.layer_files[plan.moe_layers[i].layer] = out.splits[i + 1];
        return;
    }
    // Packed: model order, cut by gguf-split's rule; each layer's experts staged on their own.
    std::vector<const GgufPlannedTensor*> ordered;
    for (const auto& [name, t] : by_name) ordered.push_back(&t);
    std::sort(ordered.begin(), ordered.end(), [](const GgufPlannedTensor* a, const GgufPlannedTensor* b) {
        return gguf_tensor_order(a->info.name) < gguf_tensor_order(b->info.name);
    });
    std::vector<std::uint64_t> padded;
    for (const auto* t : ordered) padded.push_back((t->info.bytes + gguf_default_alignment - 1) / gguf_default_alignment * gguf_default_alignment);
    std::vector<std::size_t> starts = gguf_part_starts(padded, packing);
    starts.push_back(ordered.size());
    groups.assign(starts.size() - 1, {});
    for (std::size_t g = 0; g + 1 < starts.size(); ++g)
        for (std::size_t k = starts[g]; k < starts[g + 1]; ++k) groups[g].push_back(*ordered[k]);
    if (packing.single_file) out.splits = {lay_out_file(gguf_single_file_name, groups[0], metadata)};
    else out.splits = lay_out_parts(groups, metadata, by_name.size());
    out.packed = true;
    for (const auto& layer : plan.moe_layers) {
        std::vector<GgufPlannedTensor> experts;
        for (Projection p : expert_projections) experts.push_back(by_name.at(gguf_expert_tensor_name(layer.layer, p)));
        out.layer_files[layer.layer] = lay_out_file(gguf_staged_layer_name(layer.layer), std::move(experts), {});
    }
}

// The tokenizer's keys: SentencePiece's (llama), or byte-level BPE's from tokenizer.json — or
// from tiktoken.model where the family's converter reads one and the folder has no tokenizer.json.
std::vector<GgufKeyValue> read_vocabulary(const GgufArchitecture& arch, const fs::path& dir, const GgufVocabRequest& request) {
    if (arch.vocabulary == GgufArchitecture::Vocabulary::llama) return gguf_llama_vocab(dir, request);
    std::error_code ec;
    if (arch.tiktoken_fallback && !fs::exists(dir / "tokenizer.json", ec) && fs::exists(dir / tiktoken_file_name, ec))
        return gguf_tiktoken_vocab(dir, request);
    return gguf_bpe_vocab(dir, request);
}

// read_vocabulary(), kept for the next call with the same request on the same files: plan_gguf()
// runs for each of the format's entry points, and a large vocabulary takes a good part of a
// second to read (Kimi's merges are rebuilt from its ranks).
std::vector<GgufKeyValue> vocabulary_metadata(const GgufArchitecture& arch, const fs::path& dir, const GgufVocabRequest& request) {
    std::string key = dir.string() + '\n' + std::to_string(static_cast<int>(arch.vocabulary)) + std::to_string(arch.tiktoken_fallback) + '\n' +
                      request.pre + '\n' + std::to_string(request.vocab_size) + '\n';
    for (const auto& [type, content] : request.named_specials) key += type + '=' + content + '\n';
    for (const char* name : {"tokenizer.json", "tokenizer.model", tiktoken_file_name, "tokenizer_config.json", "config.json",
                             "special_tokens_map.json", "added_tokens.json", "chat_template.jinja", "chat_template.json"}) {
        std::error_code ec;
        const auto size = fs::file_size(dir / name, ec);
        const auto time = ec ? fs::file_time_type{} : fs::last_write_time(dir / name, ec);
        key += ec ? std::string("-") : std::to_string(size) + '@' + std::to_string(time.time_since_epoch().count());
        key += '\n';
    }
    static std::mutex mutex;
    static std::pair<std::string, std::vector<GgufKeyValue>> last;
    {
        const std::lock_guard lock(mutex);
        if (last.first == key) return last.second;
    }
    std::vector<GgufKeyValue> kv = read_vocabulary(arch, dir, request);
    const std::lock_guard lock(mutex);
    last = {key, kv};
    return kv;
}

}  // namespace

std::string gguf_staged_layer_name(std::int64_t layer) {
    char name[64];
    std::snprintf(name, sizeof name, "model-layer-%05lld.staged", static_cast<long long>(layer));
    return name;
}

std::string gguf_split_name(std::size_t index, std::size_t count) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.gguf", index + 1, count);
    return name;
}

GgufPlan plan_gguf(const OutputContext& context) {
    const ModelPlan& plan = *context.plan;
    const Checkpoint& source = *context.source;
    // The tokenizer metadata is built from the source folder's tokenizer files, which a GGUF
    // source does not have (docs/gguf-source.md).
    if (source.container() == "gguf")
        throw Error(ErrorKind::usage, "a GGUF source is not written as GGUF again yet",
                    {.file = source.directory().string(), .code = "GgufToGguf", .hint = "requantize it with llama-quantize --allow-requantize"});
    GgufPlan out;
    out.architecture = gguf_architecture_for(plan, *context.config, {.legacy_mla = context.options.get_bool("legacy_mla", false)});
    GgufTypeRequest request = type_request(context.options);
    out.preset = request.preset;
    const std::string imatrix_path = context.options.get_string("imatrix", "");
    if (!imatrix_path.empty()) out.imatrix = std::make_shared<const ImatrixFile>(ImatrixFile::open(imatrix_path));
    // Or measured on calibration data (the experts', by the host): the rules see an imatrix either way.
    const bool measured = context.options.get_bool("measured_importance", false);
    request.has_importance = out.imatrix != nullptr || measured;

    // Every tensor, with the type the rules give it.
    std::vector<GgufTensorType> typed;
    std::map<std::string, GgufPlannedTensor> by_name;
    for (const auto& [name, role] : plan.roles) {
        if (role == TensorRole::routed_expert_scale || role == TensorRole::skipped_mtp || role == TensorRole::skipped_buffer) continue;
        if (role == TensorRole::other && gguf_skips_multimodal(name)) continue;  // the converter's mmproj, not this file
        const EncodedWeight* w = source.weight_holding(name);
        if (w && name != w->primary()) continue;  // a scale or zero point of an encoded weight
        const std::string weight = w ? w->name : name;
        const Shape shape = w ? w->shape : source.info(name).shape;
        if (auto made = out.architecture.transforms ? out.architecture.transforms(weight, shape) : std::vector<GgufTensorTransform>{};
            !made.empty()) {
            for (GgufTensorTransform& m : made) {
                const auto source_rows = static_cast<std::int64_t>(shape_elements(shape).value_or(0) /
                                                                   static_cast<std::uint64_t>(std::max<std::int64_t>(shape.empty() ? 1 : shape.back(), 1)));
                const std::int64_t source_cols = shape.empty() ? 1 : shape.back();
                if (std::any_of(m.rows.begin(), m.rows.end(), [&](std::int64_t r) { return r < 0 || r >= source_rows; }) ||
                    static_cast<std::int64_t>(m.cols.size()) > source_cols ||
                    std::any_of(m.cols.begin(), m.cols.end(), [&](std::int64_t c) { return c < 0 || c >= source_cols; }))
                    throw Error(ErrorKind::internal, m.gguf_name + " takes rows or columns outside " + weight);
                GgufPlannedTensor t{.info = {.name = m.gguf_name, .ne = ggml_dims(transformed_shape(shape, m))},
                                    .source = weight, .source_rows = std::move(m.rows), .source_cols = std::move(m.cols), .values = m.values};
                check_gguf_dims(weight, t.info.name, t.info.ne, plan, *context.config);
                typed.push_back({t.info.name, t.info.ne, converter_type(t.info.name, t.info.ne)});
                by_name.emplace(t.info.name, std::move(t));
            }
            continue;
        }
        const auto gguf = out.architecture.tensor_name(weight);
        // The experts' matrices are stacked below; what else of them the architecture names (gpt-oss's biases) is a tensor here.
        if (role == TensorRole::routed_expert && !gguf) continue;
        if (!gguf)
            throw Error(ErrorKind::input, "has no GGUF name in llama.cpp's " + out.architecture.arch + " architecture",
                        {.tensor = weight, .code = "UnmappedGgufTensor"});
        GgufPlannedTensor t{.info = {.name = *gguf, .ne = ggml_dims(shape)}, .source = weight};
        check_gguf_dims(weight, *gguf, t.info.ne, plan, *context.config);
        if (const auto& mla = out.architecture.mla_split; mla && gguf->ends_with(".attn_kv_b.weight")) {
            check_mla_kv_b(weight, shape.front(), shape.back(), *mla);
            const std::string stem = gguf->substr(0, gguf->size() - std::string_view("attn_kv_b.weight").size());
            for (MlaPart part : {MlaPart::k_b, MlaPart::v_b}) {
                GgufPlannedTensor half{.info = {.name = stem + (part == MlaPart::k_b ? "attn_k_b.weight" : "attn_v_b.weight"),
                                                .ne = mla_part_dims(*mla, part)},
                                       .source = weight, .mla_part = part, .mla = *mla};
                typed.push_back({half.info.name, half.info.ne, converter_type(half.info.name, half.info.ne)});
                by_name.emplace(half.info.name, std::move(half));
            }
            continue;
        }
        // llama's Q/K row interleave: a weight's rows, a bias's values.
        if (const std::int64_t heads = gguf_rope_interleave_heads(out.architecture, *gguf)) {
            check_rope_interleave(weight, shape.front(), heads);
            (shape.size() > 1 ? t.source_rows : t.source_cols) = rope_interleave_order(shape.front(), heads);
        }
        typed.push_back(out.architecture.types_follow_source ? source_following_type(source, weight, *gguf, t.info.ne)
                                                             : GgufTensorType{*gguf, t.info.ne, converter_type(*gguf, t.info.ne)});
        if (gguf->ends_with("ffn_gate_tid2eid.weight")) {  // checked before any file is written
            t.index_limit = plan.num_experts;
            (void)gguf_index_table(source, weight, t.index_limit);
        }
        by_name.emplace(*gguf, std::move(t));
    }
    for (const std::string& name : out.architecture.required_tensors)
        if (!by_name.count(name))
            throw Error(ErrorKind::input, "has no tensor for GGUF " + name + ", which llama.cpp's " + out.architecture.arch + " loads",
                        {.file = context.config->source(), .code = "MissingTensor"});
    // The float presets are the converter's own output; the others are llama-quantize's.
    const bool float_preset = out.preset.default_type == f32 || out.preset.default_type == f16 || out.preset.default_type == bf16;
    // The converter writes MXFP4 experts (gpt-oss's) as they are stored, whatever its outtype:
    // they reach llama-quantize in MXFP4, and a float preset keeps them so (file type MXFP4_MOE).
    const bool mxfp4_experts = stores_mxfp4_experts(source, plan);
    if (mxfp4_experts && float_preset) out.preset.file_type = gguf_preset_named("MXFP4_MOE")->file_type;
    for (const auto& layer : plan.moe_layers)
        for (Projection p : expert_projections) {
            const ExpertWeightSource& s = layer.experts.front().weights[static_cast<int>(p)];
            GgufPlannedTensor t{.info = {.name = gguf_expert_tensor_name(layer.layer, p),
                                         .ne = {s.cols, s.rows, static_cast<std::int64_t>(layer.experts.size())}},
                                .layer = layer.layer,
                                .projection = p};
            typed.push_back({t.info.name, t.info.ne, mxfp4_experts ? mxfp4 : bf16});
            by_name.emplace(t.info.name, std::move(t));
        }
    for (const auto& t : choose_gguf_types(typed, out.architecture.facts, request)) {
        GgufPlannedTensor& planned = by_name.at(t.name);
        planned.info.type = planned.layer >= 0 && mxfp4_experts && float_preset ? mxfp4 : t.type;
        planned.converter_type = t.source_type;
        planned.info.bytes = gguf_tensor_bytes(t.name, planned.info.type, t.ne);
        if (planned.layer >= 0) planned.expert_bytes = static_cast<std::int64_t>(planned.info.bytes / static_cast<std::uint64_t>(t.ne[2]));
        if (out.imatrix && planned.info.type != t.source_type)  // llama-quantize looks up the tensors it quantizes
            planned.importance = out.imatrix->entry_for(t.name, t.ne[0], t.ne.size() > 2 ? t.ne[2] : 1);
        // llama-quantize's writer stores ggml_n_dims dimensions (Qwen3-Next's [1, n_embd] shared-expert gate: 1-D).
        if (!float_preset) drop_trailing_unit_dims(planned.info.ne);
    }

    out.carries_mxfp4 = mxfp4_experts && std::any_of(by_name.begin(), by_name.end(), [](const auto& entry) {
        return entry.second.layer >= 0 && entry.second.info.type == mxfp4;
    });

    std::vector<GgufKeyValue> metadata = general_metadata(out.architecture, out.preset);
    metadata.insert(metadata.end(), out.architecture.metadata.begin(), out.architecture.metadata.end());
    const std::int64_t vocab = context.config->int_or("vocab_size", 0);
    const GgufVocabRequest vocab_request{.pre = out.architecture.pre, .vocab_size = vocab, .named_specials = out.architecture.named_specials};
    for (auto& kv : vocabulary_metadata(out.architecture, source.directory(), vocab_request)) metadata.push_back(std::move(kv));
    if (out.imatrix)
        for (auto& kv : imatrix_metadata(*out.imatrix, imatrix_path)) metadata.push_back(std::move(kv));
    if (measured) {  // what the importance was measured on, and the stacked expert tensors it weighed
        if (!context.calibration.empty())
            metadata.push_back({"quantize.imatrix.dataset", GgufValue::string(context.calibration.substr(0, 127))});
        metadata.push_back({"quantize.imatrix.entries_count", GgufValue::i32(static_cast<std::int32_t>(3 * plan.moe_layers.size()))});
    }
    lay_out_files(out, plan, by_name, metadata, read_gguf_packing(context.options));
    return out;
}

std::string gguf_expert_types(const GgufPlan& plan) {
    std::string out;
    for (const auto& [layer, file] : plan.layer_files) {
        out += (out.empty() ? "" : ";") + std::to_string(layer) + ":";
        for (std::size_t k = 0; k < 3; ++k)
            out += (k ? "," : "") + std::string(ggml_type_name_of(file.tensors[k].info.type));
    }
    return out;
}

}  // namespace moequant::formats
