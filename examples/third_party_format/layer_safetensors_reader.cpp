#include "layer_safetensors_reader.hpp"

#include "layer_safetensors_layout.hpp"

#include <moequant/error.hpp>
#include <moequant/input_file.hpp>
#include <moequant/safetensors_reader.hpp>

#include <charconv>
#include <map>
#include <optional>
#include <sstream>

namespace example_layer_safetensors {
namespace {

using namespace moequant;
namespace fs = std::filesystem;

constexpr std::uint64_t index_size_limit = 1 << 20;

std::optional<std::int64_t> decimal(std::string_view text) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
    return v;
}

std::optional<Projection> projection_named(std::string_view name) {
    for (Projection p : expert_projections)
        if (projection_name(p) == name) return p;
    return std::nullopt;
}

// "layers.{L}.experts.{E}.{proj}.part{i}.{part name}" -> its key and part name.
std::optional<std::pair<StoredPartKey, std::string>> parse_tensor_name(std::string_view name) {
    std::vector<std::string_view> fields;
    for (std::size_t start = 0;;) {
        const std::size_t dot = name.find('.', start);
        if (fields.size() == 6 || dot == std::string_view::npos) {
            fields.push_back(name.substr(start));  // the part name may hold dots
            break;
        }
        fields.push_back(name.substr(start, dot - start));
        start = dot + 1;
    }
    if (fields.size() != 7 || fields[0] != "layers" || fields[2] != "experts" || !fields[5].starts_with("part") ||
        fields[6].empty())
        return std::nullopt;
    const auto layer = decimal(fields[1]), expert = decimal(fields[3]), part = decimal(fields[5].substr(4));
    const auto projection = projection_named(fields[4]);
    if (!layer || !expert || !part || !projection || *part > 4096) return std::nullopt;
    return std::pair{StoredPartKey{*layer, *expert, *projection, static_cast<int>(*part)}, std::string(fields[6])};
}

class Reader final : public OutputReader {
public:
    explicit Reader(const fs::path& directory) {
        const fs::path index = directory / index_file;
        std::istringstream lines(read_small_file(index, index_size_limit));
        std::string line;
        if (!std::getline(lines, line) || line != index_magic)
            throw Error(ErrorKind::input, "is not an index of " + std::string(format_id), {.file = index.string(), .code = "BadIndex"});
        std::vector<std::int64_t> layers;
        while (std::getline(lines, line)) {
            const std::size_t space = line.find(' ');
            if (space == std::string::npos || space == 0)
                throw Error(ErrorKind::input, "has a line that is not 'key value'", {.file = index.string(), .code = "BadIndex"});
            const std::string key = line.substr(0, space), value = line.substr(space + 1);
            if (key != "layers") {
                recorded_.set(key.starts_with("setting.") ? key.substr(8) : key, value);
                continue;
            }
            std::istringstream numbers(value);
            for (std::string word; numbers >> word;) {
                const auto layer = decimal(word);
                if (!layer) throw Error(ErrorKind::input, "lists a layer that is not a number", {.file = index.string(), .code = "BadIndex"});
                layers.push_back(*layer);
            }
        }
        for (std::int64_t layer : layers) open_layer(directory / layer_file(layer), layer);
    }

    Options recorded() const override { return recorded_; }

    std::vector<StoredPartKey> parts() const override {
        std::vector<StoredPartKey> keys;
        for (const auto& [key, place] : tensors_) keys.push_back(key);
        return keys;  // a std::map: sorted
    }

    StoredPart read(const StoredPartKey& key) const override {
        const auto found = tensors_.find(key);
        if (found == tensors_.end()) throw Error(ErrorKind::input, "the output holds no such part", {.code = "MissingPart"});
        const SafetensorsFile& file = files_.at(found->second.file);
        StoredPart part{key, file.path().string(), {}};
        for (const auto& [part_name, tensor] : found->second.tensors) {
            part.location = file.path().string() + ":" + tensor;
            part.tensor.parts.emplace_back(part_name, Tensor::copy_of(file.view(tensor)));
        }
        return part;
    }

private:
    struct Place {
        std::size_t file = 0;
        std::vector<std::pair<std::string, std::string>> tensors;  // part name, tensor name
    };

    void open_layer(const fs::path& path, std::int64_t layer) {
        files_.push_back(SafetensorsFile::open(path));  // checks the header against the file
        const std::size_t index = files_.size() - 1;
        for (const TensorInfo& info : files_.back().tensors()) {
            auto parsed = parse_tensor_name(info.name);
            if (!parsed || parsed->first.layer != layer)
                throw Error(ErrorKind::input, "holds a tensor that is no expert part of layer " + std::to_string(layer),
                            {.file = path.string(), .tensor = info.name, .code = "UnexpectedTensor"});
            Place& place = tensors_[parsed->first];
            place.file = index;
            place.tensors.emplace_back(std::move(parsed->second), info.name);
        }
    }

    Options recorded_;
    std::vector<SafetensorsFile> files_;
    std::map<StoredPartKey, Place> tensors_;
};

}  // namespace

std::unique_ptr<OutputReader> open_layer_safetensors(const fs::path& directory) {
    std::error_code ec;
    if (!fs::exists(directory / index_file, ec)) return nullptr;
    return std::make_unique<Reader>(directory);
}

}  // namespace example_layer_safetensors
