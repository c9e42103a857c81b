#include "gguf_checkpoint_reader.hpp"

#include "gguf_architecture.hpp"
#include "gguf_container.hpp"
#include "gguf_model_files.hpp"
#include "gguf_source_config.hpp"
#include "gguf_source_tokenizer.hpp"
#include "gguf_type_policy.hpp"
#include "ggml_types.hpp"

#include <moequant/checked_math.hpp>
#include <moequant/digest.hpp>
#include <moequant/error.hpp>

#include <charconv>
#include <set>

namespace moequant::formats {
namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t ggml_f32 = 0, ggml_f16 = 1, ggml_bf16 = 30;

[[noreturn]] void unsupported(const fs::path& file, const std::string& tensor, const std::string& why) {
    throw Error(ErrorKind::input, why, {.file = file.string(), .tensor = tensor, .code = "UnsupportedGguf"});
}

// "blk.{L}.{rest}" -> {L, rest}.
std::optional<std::pair<std::int64_t, std::string>> block_tensor(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return std::nullopt;
    std::int64_t layer = -1;
    const char* begin = name.data() + 4;
    auto [end, ec] = std::from_chars(begin, name.data() + name.size(), layer);
    if (ec != std::errc() || end == begin || *end != '.' || layer < 0) return std::nullopt;
    return std::pair{layer, std::string(end + 1)};
}

// The checkpoint names of a MoE layer's expert `e` for the stacked tensor `rest`
// (ffn_{gate,up,down}_exps.weight); nullopt for another tensor.
std::optional<std::string> expert_name(const std::string& arch, std::int64_t layer, std::int64_t e, const std::string& rest) {
    static const std::pair<const char*, std::pair<const char*, const char*>> projections[] = {
        {"ffn_gate_exps.weight", {"gate_proj", "w1"}},
        {"ffn_up_exps.weight", {"up_proj", "w3"}},
        {"ffn_down_exps.weight", {"down_proj", "w2"}},
    };
    for (const auto& [gguf, names] : projections)
        if (rest == gguf) {
            const std::string L = std::to_string(layer), E = std::to_string(e);
            if (arch == "llama" || arch == "minimax-m2")  // Mixtral's names, which MiniMax kept
                return "model.layers." + L + ".block_sparse_moe.experts." + E + "." + names.second + ".weight";
            return "model.layers." + L + ".mlp.experts." + E + "." + names.first + ".weight";
        }
    return std::nullopt;
}

// The architectures whose converter splits MLA's kv_b_proj into attn_k_b / attn_v_b.
bool splits_kv_b(const std::string& arch) { return arch == "deepseek2" || arch == "deepseek32" || arch == "glm-dsa"; }

// One GGUF file's tensors as the checkpoint presents them.
class FilePresentation {
public:
    FilePresentation(const fs::path& file, const GgufFile& header, const std::string& arch, std::int64_t q_heads, std::int64_t k_heads,
                     const std::set<std::int64_t>& layers_with_kv_b)
        : file_(file), header_(header), arch_(arch), q_heads_(q_heads), k_heads_(k_heads), layers_with_kv_b_(layers_with_kv_b) {}

    std::vector<TensorInfo> tensors() {
        for (const GgufTensorInfo& t : header_.tensors) present(t);
        return std::move(out_);
    }

private:
    void present(const GgufTensorInfo& t) {
        const auto size = ggml_type_size(t.type);
        if (!size) unsupported(file_, t.name, "has ggml type " + std::to_string(t.type) + ", which moequant does not know");
        const std::string type(ggml_type_name_of(t.type));
        const bool plain = t.type == ggml_f32 || t.type == ggml_f16 || t.type == ggml_bf16;
        if (!plain && !decodable(t.type))
            unsupported(file_, t.name, "is of ggml type " + type + ", which moequant does not decode (it reads the types it writes)");
        const std::int64_t row_bytes = t.ne[0] / size->block * size->block_bytes;
        const auto block = block_tensor(t.name);

        // The stacked experts: one checkpoint tensor per expert, a byte range of the stack.
        if (block && t.ne.size() == 3)
            if (expert_name(arch_, block->first, 0, block->second)) {
                const std::uint64_t matrix = checked_mul(static_cast<std::uint64_t>(t.ne[1]), static_cast<std::uint64_t>(row_bytes), t.name);
                for (std::int64_t e = 0; e < t.ne[2]; ++e) {
                    const std::string name = *expert_name(arch_, block->first, e, block->second);
                    add(plain ? name : name + ".gguf." + type, plain ? dtype_of(t.type) : DType::U8,
                        plain ? Shape{t.ne[1], t.ne[0]} : Shape{t.ne[1], row_bytes}, t.offset + static_cast<std::uint64_t>(e) * matrix, matrix);
                }
                return;
            }
        // deepseek2's kv_b_proj as the converter splits it: both parts become the one weight.
        if (block && splits_kv_b(arch_) && (block->second == "attn_k_b.weight" || block->second == "attn_v_b.weight")) {
            if (layers_with_kv_b_.count(block->first)) return;  // the file keeps attn_kv_b whole too: that one is read
            if (t.ne.size() != 3) unsupported(file_, t.name, "is not 3-D (per head), as llama.cpp stores the MLA split");
            const bool k = block->second == "attn_k_b.weight";
            add("model.layers." + std::to_string(block->first) + ".self_attn.kv_b_proj.weight" + (k ? ".gguf_k_b." : ".gguf_v_b.") + type,
                DType::U8, {t.ne[1] * t.ne[2], row_bytes}, t.offset, t.bytes);
            return;
        }
        const auto name = gguf_checkpoint_name(arch_, t.name);
        if (!name) unsupported(file_, t.name, "has no checkpoint name in moequant's reading of " + arch_);
        if (t.ne.size() > 2) unsupported(file_, t.name, "has " + std::to_string(t.ne.size()) + " dimensions where the checkpoint has at most 2");
        const std::int64_t rows = t.ne.size() == 2 ? t.ne[1] : 1;
        if (const std::int64_t heads = rope_heads(block ? block->second : std::string())) {
            if (t.ne.size() != 2) unsupported(file_, t.name, "is a llama Q/K bias, which moequant does not read yet");
            add(*name + ".gguf_rope" + std::to_string(heads) + "." + type, DType::U8, {rows, row_bytes}, t.offset, t.bytes);
            return;
        }
        if (plain) {
            Shape shape(t.ne.rbegin(), t.ne.rend());
            add(*name, dtype_of(t.type), shape, t.offset, t.bytes);
            return;
        }
        if (t.ne.size() != 2) unsupported(file_, t.name, "is a 1-D tensor of a block type, which no checkpoint weight is");
        add(*name + ".gguf." + type, DType::U8, {rows, row_bytes}, t.offset, t.bytes);
    }

    // llama's Q/K rows are interleaved per head (the converter's permute).
    std::int64_t rope_heads(const std::string& rest) const {
        if (arch_ != "llama") return 0;
        if (rest.rfind("attn_q.", 0) == 0) return q_heads_;
        if (rest.rfind("attn_k.", 0) == 0) return k_heads_;
        return 0;
    }

    static bool decodable(std::uint32_t type);
    static DType dtype_of(std::uint32_t type) { return type == ggml_f32 ? DType::F32 : type == ggml_f16 ? DType::F16 : DType::BF16; }

    void add(std::string name, DType dtype, Shape shape, std::uint64_t begin, std::uint64_t bytes) {
        out_.push_back({std::move(name), dtype, std::move(shape), begin, begin + bytes});
    }

    const fs::path& file_;
    const GgufFile& header_;
    const std::string& arch_;
    std::int64_t q_heads_, k_heads_;
    const std::set<std::int64_t>& layers_with_kv_b_;
    std::vector<TensorInfo> out_;
};

// The types whose rows the ggml encoding decodes: every block type moequant writes.
// The block types the ggml encoding decodes: every type moequant writes (ggml_types()), the
// floats being presented as themselves.
bool FilePresentation::decodable(std::uint32_t type) {
    for (const ggml_quants::GgmlType& t : ggml_quants::ggml_types())
        if (static_cast<std::uint32_t>(t.id) == type && t.block > 1) return true;
    return false;
}

// What the header says, digested: the run manifest tells a changed file by it.
std::string header_digest(const GgufFile& header) {
    Digest64 d;
    for (const auto& kv : header.metadata) d.update(kv.key + "\n" + kv.value.bytes + "\n");
    for (const auto& t : header.tensors) {
        d.update(t.name + " " + std::to_string(t.type) + " " + std::to_string(t.offset));
        for (std::int64_t n : t.ne) d.update(" " + std::to_string(n));
        d.update("\n");
    }
    return d.hex();
}

std::int64_t head_count(const GgufFile& header, const std::string& arch, const std::string& key, std::int64_t fallback) {
    const GgufValue* v = header.find(arch + "." + key);
    if (!v) return fallback;
    const auto u = v->as_unsigned();
    return u && *u > 0 && *u <= (1u << 20) ? static_cast<std::int64_t>(*u) : fallback;
}

}  // namespace

bool GgufCheckpointReader::recognises(const fs::path& path) const {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        // A folder with a safetensors or PyTorch checkpoint is that checkpoint, whatever else it holds.
        for (const char* name : {"model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json", "pytorch_model.bin"})
            if (fs::exists(path / name, ec)) return false;
        for (const auto& entry : fs::directory_iterator(path, ec))
            if (entry.path().extension() == ".gguf") return true;
        return false;
    }
    return path.extension() == ".gguf" && fs::exists(path, ec);
}

CheckpointDescription GgufCheckpointReader::describe(const fs::path& path) const {
    const std::vector<fs::path> files = gguf_model_files(path);
    if (files.empty())
        throw Error(ErrorKind::input, "holds no GGUF model", {.file = path.string(), .code = "NoCheckpoint"});
    std::error_code ec;
    CheckpointDescription d;
    d.container = "gguf";
    d.directory = files.front().parent_path().empty() ? fs::path(".") : files.front().parent_path();
    std::vector<GgufFile> headers;
    for (const fs::path& file : files) {
        if (!fs::exists(file, ec))
            throw Error(ErrorKind::input, "is missing: the split GGUF has " + std::to_string(files.size()) + " parts",
                        {.file = file.string(), .code = "MissingPart"});
        headers.push_back(read_gguf_file_header(file.string()));
    }
    const GgufValue* arch_value = headers.front().find("general.architecture");
    const std::string arch = arch_value && arch_value->as_string() ? *arch_value->as_string() : std::string();

    GgufSourceTensors facts;
    std::set<std::int64_t> layers_with_kv_b, expert_layers, mlp_layers;
    for (const GgufFile& header : headers)
        for (const GgufTensorInfo& t : header.tensors) {
            if (t.name == "output.weight") facts.has_output = true;
            if (t.name == "token_embd.weight" && t.ne.size() == 2) facts.vocab_rows = t.ne[1];
            if (const auto block = block_tensor(t.name)) {
                if (block->second == "attn_q.bias") facts.has_attention_bias = true;
                if (block->second == "attn_q_norm.weight") facts.has_qk_norm = true;
                if (block->second == "exp_probs_b.bias") facts.has_router_bias = true;
                if (block->second == "attn_kv_b.weight") layers_with_kv_b.insert(block->first);
                if (block->second == "ffn_gate_exps.weight") expert_layers.insert(block->first);
                if (block->second == "ffn_gate.weight") mlp_layers.insert(block->first);
            }
        }
    for (std::int64_t layer : mlp_layers)
        if (!expert_layers.count(layer)) facts.dense_layers.push_back(layer);
    d.side_files.emplace_back("config.json", gguf_source_config(headers.front(), facts, files.front().string()));
    GgufSourceTokenizer tokenizer = gguf_source_tokenizer(headers.front(), files.front().string());
    if (tokenizer.missing.empty()) {
        d.side_files.emplace_back("tokenizer.json", std::move(tokenizer.tokenizer_json));
        d.side_files.emplace_back("tokenizer_config.json", std::move(tokenizer.tokenizer_config_json));
    }

    const std::int64_t q_heads = head_count(headers.front(), arch, "attention.head_count", 0);
    const std::int64_t k_heads = head_count(headers.front(), arch, "attention.head_count_kv", q_heads);
    for (std::size_t i = 0; i < files.size(); ++i) {
        FilePresentation presentation(files[i], headers[i], arch, q_heads, k_heads, layers_with_kv_b);
        d.files.push_back({files[i].filename().string(), presentation.tensors(), header_digest(headers[i])});
    }
    return d;
}

}  // namespace moequant::formats
