#include "gguf_reader.hpp"

#include "gguf_container.hpp"
#include "gguf_model_files.hpp"
#include "gguf_plan.hpp"
#include "gguf_type_policy.hpp"
#include "kt_llamafile_check.hpp"

#include <moequant/error.hpp>
#include <moequant/input_file.hpp>

#include <algorithm>
#include <charconv>
#include <map>

namespace moequant::formats {
namespace {

namespace fs = std::filesystem;

// "blk.{L}.ffn_{gate,up,down}_exps.weight" -> layer and projection.
std::optional<std::pair<std::int64_t, Projection>> expert_tensor(const std::string& name) {
    for (Projection p : expert_projections) {
        const std::string suffix = ".ffn_" + std::string(projection_name(p)) + "_exps.weight";
        if (name.size() <= suffix.size() + 4 || name.rfind("blk.", 0) != 0 || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        std::int64_t layer = -1;
        const char* begin = name.data() + 4;
        const char* end = name.data() + name.size() - suffix.size();
        if (std::from_chars(begin, end, layer).ptr == end && layer >= 0) return std::pair{layer, p};
    }
    return std::nullopt;
}

struct StoredExperts {
    fs::path file;
    GgufTensorInfo info;
    std::int64_t rows = 0, row_bytes = 0;
};

class GgufReader final : public OutputReader {
public:
    GgufReader(fs::path directory, std::map<std::pair<std::int64_t, Projection>, StoredExperts> experts, Options recorded)
        : directory_(std::move(directory)), experts_(std::move(experts)), recorded_(std::move(recorded)) {}

    RuntimeCheckReport run_runtime_check(std::string_view name, const ModelPlan& plan) const override {
        if (name == kt_llamafile_check_info().name) return check_kt_llamafile(directory_, plan);
        return OutputReader::run_runtime_check(name, plan);
    }

    Options recorded() const override { return recorded_; }

    std::vector<StoredPartKey> parts() const override {
        std::vector<StoredPartKey> keys;
        for (const auto& [where, stored] : experts_)
            for (std::int64_t e = 0; e < stored.info.ne[2]; ++e) keys.push_back({where.first, e, where.second, 0});
        std::sort(keys.begin(), keys.end());
        return keys;
    }

    StoredPart read(const StoredPartKey& key) const override {
        const auto it = experts_.find({key.layer, key.projection});
        if (it == experts_.end() || key.part != 0 || key.expert < 0 || key.expert >= it->second.info.ne[2])
            throw Error(ErrorKind::input, "the GGUF output holds no such expert matrix");
        const StoredExperts& s = it->second;
        StoredPart out{key, s.file.filename().string() + ":" + s.info.name + "[" + std::to_string(key.expert) + "]", {}};
        Tensor rows(DType::U8, {s.rows, s.row_bytes});
        const auto bytes = static_cast<std::uint64_t>(s.rows * s.row_bytes);
        InputFile::open(s.file).read_at(rows.data(), static_cast<std::size_t>(bytes), s.info.offset + static_cast<std::uint64_t>(key.expert) * bytes);
        out.tensor.method = std::string(ggml_type_name_of(s.info.type));
        out.tensor.parts.emplace_back("weight", std::move(rows));
        return out;
    }

private:
    fs::path directory_;
    std::map<std::pair<std::int64_t, Projection>, StoredExperts> experts_;
    Options recorded_;
};

}  // namespace

std::unique_ptr<OutputReader> open_gguf(const fs::path& path) {
    std::error_code ec;
    const std::vector<fs::path> files = gguf_model_files(path);
    if (files.empty()) return nullptr;
    const std::size_t count = files.size();
    const fs::path directory = fs::is_regular_file(path, ec) ? path.parent_path() : path;
    std::map<std::pair<std::int64_t, Projection>, StoredExperts> experts;
    Options recorded;
    std::string types;
    for (std::size_t i = 0; i < files.size(); ++i) {
        const fs::path& file = files[i];
        if (!fs::is_regular_file(file, ec))
            throw Error(ErrorKind::input, "is missing: the GGUF output has " + std::to_string(count) + " parts",
                        {.file = file.string(), .code = "IncompleteOutput"});
        const GgufFile header = read_gguf_file_header(file.string());
        if (i == 0) {
            if (const GgufValue* ft = header.find("general.file_type"); ft && ft->as_unsigned())
                recorded.set("file_type", std::to_string(*ft->as_unsigned()));
            if (const GgufValue* arch = header.find("general.architecture"); arch && arch->as_string())
                recorded.set("gguf.architecture", arch->as_string()->substr(0, 64));
            if (const GgufValue* imatrix = header.find("quantize.imatrix.entries_count"); imatrix && imatrix->as_signed())
                recorded.set("gguf.imatrix_entries", std::to_string(*imatrix->as_signed()));
        }
        for (const auto& t : header.tensors) {
            const auto where = expert_tensor(t.name);
            if (!where) continue;
            if (t.ne.size() != 3)
                throw Error(ErrorKind::input, "is not a stack of expert matrices [E, out, in]", {.file = file.string(), .tensor = t.name});
            const auto size = ggml_type_size(t.type).value();
            experts[*where] = {file, t, t.ne[1], t.ne[0] / size.block * size.block_bytes};
        }
    }
    if (experts.empty()) return nullptr;
    std::map<std::int64_t, std::array<std::string, 3>> by_layer;
    std::int64_t expert_count = 0;
    for (const auto& [where, s] : experts) {
        by_layer[where.first][static_cast<std::size_t>(where.second)] = std::string(ggml_type_name_of(s.info.type));
        expert_count = s.info.ne[2];
    }
    for (const auto& [layer, names] : by_layer) {
        if (names[0].empty() || names[1].empty() || names[2].empty())
            throw Error(ErrorKind::input, "layer " + std::to_string(layer) + " lacks one of its expert tensors",
                        {.file = directory.string(), .code = "IncompleteOutput"});
        types += (types.empty() ? "" : ";") + std::to_string(layer) + ":" + names[0] + "," + names[1] + "," + names[2];
    }
    recorded.set("quantizer", "gguf");
    recorded.set("gguf.expert_types", types);
    recorded.set("parts", "1");
    recorded.set("experts", std::to_string(expert_count));
    recorded.set("experts_on", "cpu");  // llama.cpp -ot exps=CPU, kt's LLAMAFILE
    return std::make_unique<GgufReader>(directory, std::move(experts), std::move(recorded));
}

}  // namespace moequant::formats
