#include "kt_tree_reader.hpp"

#include "kt_naming.hpp"
#include "stored_parts.hpp"

#include <moequant/error.hpp>
#include <moequant/input_file.hpp>

namespace moequant::formats {
namespace {

namespace fs = std::filesystem;

struct ParsedFile {
    std::string prefix;  // INT4 / INT8 / MOE_INT8
    Projection projection;
    bool backward;  // the backward weights' "{P}_{proj}_bwd_..."
    std::int64_t expert, bytes;
    bool scale;
    std::string part() const { return quantizer_part_name(scale ? "scale" : "weight", backward); }
};

// "{P}_{proj}[_bwd]_{e}_{B}Byte_{quant|scale}_.kt", read from the right (the prefix may hold
// '_': MOE_INT8); nullopt for any other name.
std::optional<ParsedFile> parse_kt_file(std::string_view name) {
    const std::vector<std::string_view> fields = split_fields(name, '_');
    // [MOE, ]INT8, down, [bwd, ]17, 3670016Byte, quant, .kt
    const std::size_t n = fields.size();
    if (n < 6 || fields[n - 1] != ".kt" || !fields[n - 3].ends_with("Byte")) return std::nullopt;
    if (fields[n - 2] != "quant" && fields[n - 2] != "scale") return std::nullopt;
    const bool backward = fields[n - 5] == "bwd";
    if (backward && n < 7) return std::nullopt;
    const std::string_view proj = fields[n - 5 - (backward ? 1 : 0)];
    auto projection = projection_from_name(proj);
    auto expert = parse_decimal(fields[n - 4]), bytes = parse_decimal(fields[n - 3].substr(0, fields[n - 3].size() - 4));
    const std::string_view prefix = name.substr(0, static_cast<std::size_t>(proj.data() - name.data()) - 1);
    if (prefix.empty() || !projection || !expert || !bytes) return std::nullopt;
    return ParsedFile{std::string(prefix), *projection, backward, *expert, *bytes, fields[n - 2] == "scale"};
}

// "_layer_{L}" / "_numa_{i}" -> the number.
std::optional<std::int64_t> numbered(std::string_view name, std::string_view prefix) {
    if (!name.starts_with(prefix)) return std::nullopt;
    return parse_decimal(name.substr(prefix.size()));
}

Tensor read_file(const fs::path& file, DType dtype, std::int64_t expected_bytes) {
    const InputFile in = InputFile::open(file);
    const std::uint64_t size = in.size();
    if (size != static_cast<std::uint64_t>(expected_bytes))
        throw Error(ErrorKind::input,
                    "holds " + std::to_string(size) + " bytes but its name says " + std::to_string(expected_bytes),
                    {.file = file.string(), .code = "SizeMismatch"});
    const std::int64_t element = dtype == DType::F32 ? 4 : 1;
    if (expected_bytes % element != 0)
        throw Error(ErrorKind::input, "size is not a whole number of float32 scales", {.file = file.string(), .code = "SizeMismatch"});
    Tensor t(dtype, {expected_bytes / element});
    in.read_at(t.data(), t.size_bytes(), 0);
    return t;
}

class KtTreeReader final : public OutputReader {
public:
    KtTreeReader(fs::path directory, StoredPartIndex index, Options recorded)
        : directory_(std::move(directory)), index_(std::move(index)), recorded_(std::move(recorded)) {}

    Options recorded() const override { return recorded_; }
    std::vector<StoredPartKey> parts() const override { return keys_of(index_); }

    StoredPart read(const StoredPartKey& key) const override {
        return read_stored_part(index_, key, recorded_, [&](const std::string& tensor, const std::string& relative) {
            const auto parsed = parse_kt_file(fs::path(relative).filename().string());  // named it when listed
            return std::pair{relative, read_file(directory_ / relative, parsed->scale ? DType::F32 : DType::I8, parsed->bytes)};
        });
    }

private:
    fs::path directory_;
    StoredPartIndex index_;
    Options recorded_;
};

}  // namespace

std::unique_ptr<OutputReader> open_kt_tree(const fs::path& directory) {
    StoredPartIndex index;
    std::string prefix;
    std::int64_t parts = 0;
    std::error_code ec;
    if (!fs::is_directory(directory, ec)) return nullptr;  // a tree is a folder
    for (const auto& layer_entry : fs::directory_iterator(directory, ec)) {
        const auto layer = numbered(layer_entry.path().filename().string(), "_layer_");
        if (!layer || !layer_entry.is_directory()) continue;
        for (const auto& numa_entry : fs::directory_iterator(layer_entry.path())) {
            const auto part = numbered(numa_entry.path().filename().string(), "_numa_");
            if (!part || !numa_entry.is_directory() || *part > 1'000'000) continue;
            parts = std::max(parts, *part + 1);
            for (const auto& file : fs::directory_iterator(numa_entry.path())) {
                const auto parsed = parse_kt_file(file.path().filename().string());
                if (!parsed) continue;
                if (prefix.empty()) prefix = parsed->prefix;
                if (parsed->prefix != prefix)
                    throw Error(ErrorKind::input, "mixes " + prefix + " and " + parsed->prefix + " files",
                                {.file = directory.string(), .code = "MixedMethods"});
                const StoredPartKey key{*layer, parsed->expert, parsed->projection, static_cast<int>(*part)};
                index[key][parsed->part()] = fs::relative(file.path(), directory).string();
            }
        }
    }
    if (ec) throw Error(ErrorKind::input, "cannot list the folder: " + ec.message(), {.file = directory.string()});
    if (index.empty()) return nullptr;
    Options recorded;
    recorded.set("experts_on", "cpu");  // kt-kernel's CPU experts
    record_backward_weights(recorded, index);
    record_method(recorded, prefix);
    recorded.set("parts", std::to_string(parts));
    return std::make_unique<KtTreeReader>(directory, std::move(index), std::move(recorded));
}

}  // namespace moequant::formats
