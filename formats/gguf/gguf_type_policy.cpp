#include "gguf_type_policy.hpp"

#include "gguf_container.hpp"

#include <moequant/error.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>

namespace moequant::formats {
namespace {

using namespace ggml_type_id;

// llama.cpp's enum llama_ftype values of the presets moequant writes.
enum FileType : std::uint32_t {
    ftype_f16 = 1, ftype_q4_0 = 2, ftype_q4_1 = 3, ftype_q8_0 = 7, ftype_q5_0 = 8, ftype_q5_1 = 9, ftype_q2_k = 10,
    ftype_q3_k_s = 11, ftype_q3_k_m = 12, ftype_q3_k_l = 13, ftype_q4_k_s = 14, ftype_q4_k_m = 15, ftype_q5_k_s = 16,
    ftype_q5_k_m = 17, ftype_q6_k = 18, ftype_iq4_nl = 25, ftype_iq4_xs = 30, ftype_bf16 = 32, ftype_mxfp4_moe = 38,
};

struct PresetEntry {
    const char* name;
    FileType file_type;
    std::uint32_t default_type;
};
// llama-quantize's names (tools/quantize/quantize.cpp QUANT_OPTIONS) for the types moequant writes.
constexpr std::array<PresetEntry, 19> presets = {{
    {"F16", ftype_f16, f16},          {"BF16", ftype_bf16, bf16},       {"Q8_0", ftype_q8_0, q8_0},
    {"Q4_0", ftype_q4_0, q4_0},       {"Q4_1", ftype_q4_1, q4_1},       {"Q5_0", ftype_q5_0, q5_0},
    {"Q5_1", ftype_q5_1, q5_1},       {"Q2_K", ftype_q2_k, q2_k},       {"Q3_K_S", ftype_q3_k_s, q3_k},
    {"Q3_K_M", ftype_q3_k_m, q3_k},   {"Q3_K_L", ftype_q3_k_l, q3_k},   {"Q4_K_S", ftype_q4_k_s, q4_k},
    {"Q4_K_M", ftype_q4_k_m, q4_k},   {"Q5_K_S", ftype_q5_k_s, q5_k},   {"Q5_K_M", ftype_q5_k_m, q5_k},
    {"Q6_K", ftype_q6_k, q6_k},       {"IQ4_NL", ftype_iq4_nl, iq4_nl}, {"IQ4_XS", ftype_iq4_xs, iq4_xs},
    {"MXFP4_MOE", ftype_mxfp4_moe, mxfp4},
}};

struct TypeName {
    std::uint32_t id;
    const char* name;
};
constexpr std::array<TypeName, 17> type_names = {{
    {f32, "f32"}, {f16, "f16"}, {q4_0, "q4_0"}, {q4_1, "q4_1"}, {q5_0, "q5_0"}, {q5_1, "q5_1"}, {q8_0, "q8_0"}, {q2_k, "q2_K"},
    {q3_k, "q3_K"}, {q4_k, "q4_K"}, {q5_k, "q5_K"}, {q6_k, "q6_K"}, {iq4_nl, "iq4_nl"}, {iq4_xs, "iq4_xs"}, {i32, "i32"},
    {bf16, "bf16"}, {mxfp4, "mxfp4"},
}};

bool same_ignoring_case(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

std::int64_t block_of(std::uint32_t type) { return ggml_type_size(type).value_or(GgmlTypeSize{}).block; }

bool is_quantized(std::uint32_t type) { return type != f32 && type != f16 && type != bf16; }

// tensor_get_category: substring tests, in llama.cpp's order.
enum class Category { token_embd, attn_q, attn_v, attn_k, attn_qkv, attn_kv_b, attn_output, ffn_up, ffn_gate, ffn_down, output, other };

Category category_of(const std::string& name) {
    auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
    if (name == "output.weight") return Category::output;
    if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::token_embd;
    if (has("attn_qkv.weight")) return Category::attn_qkv;
    if (has("attn_kv_b.weight")) return Category::attn_kv_b;
    if (has("attn_v.weight")) return Category::attn_v;
    if (has("attn_k.weight")) return Category::attn_k;
    if (has("attn_q.weight")) return Category::attn_q;
    if (has("attn_output.weight")) return Category::attn_output;
    if (has("ffn_up")) return Category::ffn_up;
    if (has("ffn_gate")) return Category::ffn_gate;
    if (has("ffn_down")) return Category::ffn_down;
    return Category::other;
}

bool is_attn_v_like(Category c) { return c == Category::attn_v || c == Category::attn_qkv || c == Category::attn_kv_b; }

// ggml_n_dims: trailing dimensions of 1 do not count.
int dims_of(const std::vector<std::int64_t>& ne) {
    int n = static_cast<int>(ne.size());
    while (n > 1 && ne[static_cast<std::size_t>(n - 1)] == 1) --n;
    return n;
}

// tensor_allows_quantization: which tensors llama.cpp quantizes at all.
bool allows_quantization(const GgufTensorType& t, const GgufTypeRequest& request) {
    if (dims_of(t.ne) < 2) return false;
    const std::string& name = t.name;
    if (name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
    if (request.leave_output && name == "output.weight") return false;
    if (name == "position_embd.weight" || name == "token_types.weight") return false;
    static constexpr std::array<const char*, 34> never = {
        "_norm.weight",           "ffn_gate_inp.weight",     "ffn_gate_tid2eid.weight",  "altup",
        "laurel",                 "per_layer_model_proj",    "ssm_conv1d",               "shortconv.conv.weight",
        "indexer.k_proj.weight",  "indexer.q_proj.weight",   "time_mix_first.weight",    "time_mix_w0.weight",
        "time_mix_w1.weight",     "time_mix_w2.weight",      "time_mix_v0.weight",       "time_mix_v1.weight",
        "time_mix_v2.weight",     "time_mix_a0.weight",      "time_mix_a1.weight",       "time_mix_a2.weight",
        "time_mix_g1.weight",     "time_mix_g2.weight",      "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight", "attn_rel_b.weight",   ".position_embd",           "sam.pos_embd",
        "sam.neck.",              "sam.net_",                ".rel_pos",                 ".patch_embd",
        ".patch_merger",          "a.rvq.codebook",
    };
    for (const char* part : never)
        if (name.find(part) != std::string::npos) return false;
    return name.find("mm.a.code_embd") == std::string::npos;
}

bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// The counters llama-quantize keeps while it walks the tensors.
struct Walk {
    int n_attention_wv = 0, i_attention_wv = 0, i_ffn_down = 0, i_ffn_gate = 0, i_ffn_up = 0;
    bool tied_embeddings = true;
};

// The layer a ffn tensor belongs to: from its name when the model has experts, else the counter.
int layer_of(const GgufTensorType& t, int counter, const GgufModelFacts& facts) {
    if (std::max(1, facts.n_expert) <= 1) return counter;
    int layer = -1;
    if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) != 1 || layer < 0 || layer >= facts.n_layer)
        throw Error(ErrorKind::input, "is not in a block 0.." + std::to_string(facts.n_layer - 1) + " llama-quantize's rules can place",
                    {.tensor = t.name, .code = "BadGgufLayer"});
    return layer;
}

// llama_tensor_get_type_impl for the presets moequant writes (the IQ1/IQ2/IQ3/TQ branches
// belong to presets it does not offer).
std::uint32_t mixture_type(std::uint32_t type, const GgufTensorType& t, Category cat, const GgufModelFacts& facts,
                           const GgufTypeRequest& request, Walk& walk) {
    const auto ftype = static_cast<FileType>(request.preset.file_type);
    const int n8 = facts.n_expert == 8;
    if (cat == Category::output || (walk.tied_embeddings && cat == Category::token_embd)) {
        if (request.output_type) return *request.output_type;
        if (ftype == ftype_mxfp4_moe || t.ne[0] % block_of(type) != 0) return q8_0;
        return type != q8_0 ? q6_k : type;
    }
    if (ftype == ftype_mxfp4_moe) return t.ne.size() > 2 && t.ne[2] > 1 ? mxfp4 : q8_0;
    if (cat == Category::token_embd) return request.token_embedding_type.value_or(type);
    if (is_attn_v_like(cat)) {
        if (ftype == ftype_q2_k) type = facts.n_gqa >= 4 ? q4_k : q3_k;
        else if ((ftype == ftype_iq4_nl || ftype == ftype_iq4_xs) && facts.n_gqa >= 4) type = q5_k;
        else if (ftype == ftype_q3_k_m) type = walk.i_attention_wv < 2 ? q5_k : q4_k;
        else if (ftype == ftype_q3_k_l) type = q5_k;
        else if ((ftype == ftype_q4_k_m || ftype == ftype_q5_k_m) && use_more_bits(walk.i_attention_wv, walk.n_attention_wv)) type = q6_k;
        else if (ftype == ftype_q4_k_s && walk.i_attention_wv < 4) type = q5_k;
        if (n8) type = q8_0;
        ++walk.i_attention_wv;
        return type;
    }
    if (cat == Category::attn_k) return n8 ? q8_0 : type;
    if (cat == Category::ffn_down) {
        const int i = layer_of(t, walk.i_ffn_down, facts), n = facts.n_layer;
        if (ftype == ftype_q2_k) type = q3_k;
        else if (ftype == ftype_q3_k_m) type = i < n / 16 ? q5_k : q4_k;
        else if (ftype == ftype_q3_k_l) type = q5_k;
        else if (ftype == ftype_q4_k_m) { if (use_more_bits(i, n)) type = q6_k; }
        else if (i < n / 8 && (ftype == ftype_iq4_nl || ftype == ftype_iq4_xs) && !request.has_importance) type = q5_k;
        else if (ftype == ftype_q5_k_m && use_more_bits(i, n)) type = q6_k;
        else if (ftype == ftype_q4_k_s && i < n / 8) type = q5_k;
        else if ((ftype == ftype_q4_0 || ftype == ftype_q5_0) && request.has_importance && i < n / 8)
            type = ftype == ftype_q4_0 ? q4_1 : q5_1;
        ++walk.i_ffn_down;
        return type;
    }
    if (cat == Category::attn_output) {
        if (n8) {
            if (ftype == ftype_q2_k || ftype == ftype_q3_k_s || ftype == ftype_q3_k_m || ftype == ftype_iq4_nl || ftype == ftype_q4_k_s ||
                ftype == ftype_q4_k_m || ftype == ftype_iq4_xs)
                type = q5_k;
        } else if (ftype == ftype_q2_k) type = q3_k;
        else if (ftype == ftype_q3_k_m) type = q4_k;
        else if (ftype == ftype_q3_k_l) type = q5_k;
        return type;
    }
    if (cat == Category::ffn_gate) {
        layer_of(t, walk.i_ffn_gate, facts);  // checks the name as llama-quantize does
        ++walk.i_ffn_gate;
    } else if (cat == Category::ffn_up) {
        layer_of(t, walk.i_ffn_up, facts);
        ++walk.i_ffn_up;
    }
    return type;
}

// tensor_type_fallback: a type whose block does not divide the rows gives way.
std::uint32_t fallback_type(GgufTensorType& t, std::uint32_t type) {
    if (t.ne[0] % block_of(type) == 0) return type;
    t.fell_back = true;
    std::uint32_t other;
    switch (type) {
    case iq4_xs: other = iq4_nl; break;
    case q2_k: case q3_k: other = q4_0; break;
    case q4_k: other = q5_0; break;
    case q5_k: other = q5_1; break;
    case q6_k: other = q8_0; break;
    default:
        throw Error(ErrorKind::input, "has rows of " + std::to_string(t.ne[0]) + " values, which " +
                                          std::string(ggml_type_name_of(type)) + " cannot pack and has no fallback for",
                    {.tensor = t.name, .code = "UnpackableShape"});
    }
    return t.ne[0] % block_of(other) == 0 ? other : f16;
}

}  // namespace

std::optional<GgufPreset> gguf_preset_named(std::string_view name) {
    std::string_view canonical = name;
    if (same_ignoring_case(name, "Q4_K")) canonical = "Q4_K_M";
    else if (same_ignoring_case(name, "Q5_K")) canonical = "Q5_K_M";
    else if (same_ignoring_case(name, "Q3_K")) canonical = "Q3_K_M";
    for (const auto& p : presets)
        if (same_ignoring_case(canonical, p.name)) return GgufPreset{p.name, p.file_type, p.default_type};
    return std::nullopt;
}

std::vector<std::string> gguf_preset_names() {
    std::vector<std::string> names;
    for (const auto& p : presets) names.emplace_back(p.name);
    return names;
}

std::string_view ggml_type_name_of(std::uint32_t id) noexcept {
    for (const auto& t : type_names)
        if (t.id == id) return t.name;
    return "unknown";
}

std::optional<std::uint32_t> ggml_type_named_id(std::string_view name) noexcept {
    for (const auto& t : type_names)
        if (same_ignoring_case(name, t.name)) return t.id;
    return std::nullopt;
}

TensorTypeOverride parse_tensor_type_override(std::string_view text) {
    const std::size_t eq = text.find('=');
    auto refuse = [&](const std::string& why) {
        return Error(ErrorKind::usage, "--tensor-type '" + std::string(text) + "': " + why,
                     {.code = "BadTensorType", .hint = "PATTERN=TYPE, e.g. ffn_down_exps=q6_K or attn=q8_0"});
    };
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) throw refuse("expected PATTERN=TYPE");
    TensorTypeOverride o;
    o.pattern = std::string(text.substr(0, eq));
    for (char& c : o.pattern) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto type = ggml_type_named_id(text.substr(eq + 1));
    if (!type || *type == f32 || *type == i32) throw refuse("'" + std::string(text.substr(eq + 1)) + "' is no GGUF type moequant writes");
    o.type = *type;
    try {
        o.regex = std::regex(o.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
        throw refuse(std::string("the pattern is no regular expression (") + e.what() + ")");
    }
    return o;
}

std::vector<GgufTensorType> choose_gguf_types(std::vector<GgufTensorType> tensors, const GgufModelFacts& facts,
                                              const GgufTypeRequest& request) {
    auto layer = [](const std::string& name) {
        int l = -1;
        std::sscanf(name.c_str(), "blk.%d.", &l);
        return l;
    };
    std::stable_sort(tensors.begin(), tensors.end(), [&](const GgufTensorType& a, const GgufTensorType& b) {
        const int la = layer(a.name), lb = layer(b.name);
        return la != lb ? la < lb : a.name < b.name;
    });
    Walk walk;
    for (const auto& t : tensors) {
        const Category c = category_of(t.name);
        walk.n_attention_wv += is_attn_v_like(c);
        if (c == Category::output) walk.tied_embeddings = false;
    }
    const std::uint32_t preset_type = request.preset.default_type;
    for (auto& t : tensors) {
        t.fell_back = false;
        if (!allows_quantization(t, request)) {
            t.type = t.source_type;
            continue;
        }
        const Category c = category_of(t.name);
        if (request.token_embedding_type && c == Category::token_embd) {
            t.type = *request.token_embedding_type;
            continue;
        }
        if (request.output_type && c == Category::output) {
            t.type = *request.output_type;
            continue;
        }
        std::uint32_t type = preset_type;
        // The float presets are the converter's output, which keeps its F32 tensors (a DSA
        // indexer's proj, say) and the types it forces (DeepSeek-V4's Q8_0); llama-quantize would
        // quantize those it allows.
        if (!is_quantized(preset_type) && (t.source_type == f32 || t.forced)) type = t.source_type;
        if (is_quantized(preset_type)) {
            bool manual = false;
            for (const auto& o : request.overrides)
                if (std::regex_search(t.name, o.regex)) {
                    type = o.type;
                    manual = true;
                    break;
                }
            if (!manual && !request.pure) type = mixture_type(type, t, c, facts, request, walk);
            type = fallback_type(t, type);
        }
        t.type = type;
    }
    return tensors;
}

}  // namespace moequant::formats
