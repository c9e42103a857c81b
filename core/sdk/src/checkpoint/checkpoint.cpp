#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/input_file.hpp>
#include <moequant/sharded_writer.hpp>

#include "checkpoint/weight_catalog.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

namespace moequant {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr const char* single_file_name = "model.safetensors";

// PyTorch zip checkpoints (torch.save, read without running their pickle: docs/pytorch-bin.md)
// are taken where a folder has no safetensors checkpoint; their shards are the index's *.bin
// files, read through SafetensorsFile::open_pytorch with offsets over the whole file.
constexpr const char* pytorch_index_name = "pytorch_model.bin.index.json";
constexpr const char* pytorch_single_file_name = "pytorch_model.bin";

bool is_pytorch_file(const fs::path& file) { return file.extension() == ".bin"; }

SafetensorsFile open_shard_file(const fs::path& file) {
    return is_pytorch_file(file) ? SafetensorsFile::open_pytorch(file) : SafetensorsFile::open(file);
}

[[noreturn]] void bad_index(const fs::path& index, const std::string& message, std::string hint = {}) {
    throw Error(ErrorKind::input, message, {.file = index.string(), .code = "InvalidIndex", .hint = std::move(hint)});
}

// A shard name from an index must stay inside the model folder.
bool is_safe_relative_name(const std::string& name) {
    if (name.empty() || name.front() == '/') return false;
    for (const auto& part : fs::path(name))
        if (part == ".." || part == ".") return false;
    return true;
}

}  // namespace

struct Checkpoint::Impl {
    std::string container = "safetensors";
    fs::path directory;
    // A described checkpoint's side files (CheckpointDescription::side_files); the folder's otherwise.
    std::optional<std::map<std::string, std::string, std::less<>>> described_side_files;
    std::optional<fs::path> index;
    std::vector<std::string> shard_names;
    std::once_flag names_sorted;  // tensor_names is built on first use (sorting ~100k names costs)
    std::vector<std::string> tensor_names;
    std::unordered_map<std::string, std::size_t> shard_of;  // tensor -> index in shard_names
    std::unordered_map<std::string, std::size_t> shard_index;  // shard name -> index

    struct Shard {
        std::once_flag opened;
        std::optional<SafetensorsFile> file;
    };
    std::vector<std::unique_ptr<Shard>> shards;

    const SafetensorsFile& shard(std::size_t i) {
        Shard& s = *shards[i];
        std::call_once(s.opened, [&] { s.file = open_shard_file(directory / shard_names[i]); });
        return *s.file;
    }

    // The shard holding a tensor; TensorNotFound if the checkpoint has no such tensor.
    std::size_t shard_index_of(std::string_view tensor) const {
        auto it = shard_of.find(std::string(tensor));
        if (it == shard_of.end())
            throw Error(ErrorKind::input, "the checkpoint has no such tensor",
                        {.file = (index ? *index : shard_names.empty() ? directory : directory / shard_names.front()).string(),
                         .tensor = std::string(tensor),
                         .code = "TensorNotFound"});
        return it->second;
    }

    // A tensor's entry in the shard the index names; IndexMismatch if the shard lacks it.
    const TensorInfo& info_in_shard(std::string_view tensor, std::size_t i) {
        const SafetensorsFile& file = shard(i);
        if (const TensorInfo* t = file.find(tensor)) return *t;
        throw Error(ErrorKind::input,
                    "the index places this tensor in " + shard_names[i] + ", but that shard does not hold it",
                    {.file = (index ? *index : file.path()).string(),
                     .tensor = std::string(tensor),
                     .code = "IndexMismatch"});
    }

    void read_index(const fs::path& index_file) {
        const std::string text = read_small_file(index_file, json_file_limit);
        json::error_code ec;
        // The index of a big model holds ~100k entries; a monotonic arena makes building and
        // dropping the document cheap.
        json::monotonic_resource arena;
        json::value root = json::parse(text, ec, &arena);
        if (ec) bad_index(index_file, "not valid JSON: " + ec.message());
        const json::object* obj = root.if_object();
        const json::value* map = obj ? obj->if_contains("weight_map") : nullptr;
        if (!map || !map->is_object()) bad_index(index_file, "has no \"weight_map\" object");

        shard_of.reserve(map->get_object().size());
        for (const auto& kv : map->get_object()) {
            const json::string* shard = kv.value().if_string();
            if (!shard)
                bad_index(index_file, "weight_map entry for tensor '" + std::string(kv.key()) + "' is not a string");
            std::string name(*shard);
            auto it = shard_index.find(name);
            if (it == shard_index.end()) {
                if (!is_safe_relative_name(name))
                    bad_index(index_file, "weight_map names shard '" + name + "' for tensor '" +
                                              std::string(kv.key()) + "', which is not a file inside the model folder");
                it = shard_index.emplace(name, shard_names.size()).first;
                shard_names.push_back(name);
            }
            shard_of[std::string(kv.key())] = it->second;
        }
        for (const auto& name : shard_names) {
            std::error_code fec;
            if (!fs::exists(directory / name, fec))
                bad_index(index_file, "weight_map names shard '" + name + "', which does not exist in " +
                                          directory.string(),
                          "the download may be incomplete");
        }
    }

    void read_single(const fs::path& file) {
        if (is_pytorch_file(file)) container = "pytorch";
        add_opened(file.filename().string(), open_shard_file(file));
    }

    // A shard opened already (a single file, a described one): every tensor it holds is its own.
    void add_opened(const std::string& name, SafetensorsFile f) {
        const std::size_t i = shard_names.size();
        shard_names.push_back(name);
        shard_index.emplace(name, i);
        for (const auto& t : f.tensors())
            if (!shard_of.emplace(t.name, i).second)
                throw Error(ErrorKind::input, "two files of the model hold this tensor",
                            {.file = (directory / name).string(), .tensor = t.name, .code = "DuplicateTensor"});
        shards.push_back(std::make_unique<Shard>());
        std::call_once(shards.back()->opened, [&] { shards.back()->file = std::move(f); });
    }

    WeightCatalog catalog;  // the weights as the encodings see them
};

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const fs::path& path) {
    auto impl = std::make_unique<Impl>();
    std::error_code ec;
    // exists(), not is_regular_file(): a FIFO or folder under a checkpoint file's name is
    // refused by the reader (NotARegularFile) instead of being taken for a missing file.
    if (fs::is_directory(path, ec)) {
        impl->directory = path;
        if (fs::exists(path / safetensors_index_name, ec)) {
            impl->index = path / safetensors_index_name;
            impl->read_index(*impl->index);
        } else if (fs::exists(path / single_file_name, ec)) {
            impl->read_single(path / single_file_name);
        } else if (fs::exists(path / pytorch_index_name, ec)) {
            impl->index = path / pytorch_index_name;
            impl->container = "pytorch";
            impl->read_index(*impl->index);
        } else if (fs::exists(path / pytorch_single_file_name, ec)) {
            impl->read_single(path / pytorch_single_file_name);
        } else {
            std::size_t others = 0;
            for (const auto& entry : fs::directory_iterator(path, ec))
                if (entry.path().extension() == ".safetensors") ++others;
            throw Error(ErrorKind::input,
                        std::string("no ") + safetensors_index_name + ", " + single_file_name + ", " + pytorch_index_name +
                            " or " + pytorch_single_file_name + " in this folder",
                        {.file = path.string(),
                         .code = "NoCheckpoint",
                         .hint = others ? std::to_string(others) +
                                              " other .safetensors file(s) are there; pass the index or one file"
                                        : ""});
        }
    } else if (fs::exists(path, ec)) {
        impl->directory = path.parent_path().empty() ? fs::path(".") : path.parent_path();
        if (path.extension() == ".json") {
            impl->index = path;
            if (path.filename() == pytorch_index_name) impl->container = "pytorch";
            impl->read_index(path);
        } else {
            impl->read_single(path);
        }
    } else {
        throw Error(ErrorKind::input, "no such file or folder", {.file = path.string(), .code = "NoCheckpoint"});
    }
    if (impl->shards.empty())
        for (std::size_t i = 0; i < impl->shard_names.size(); ++i) impl->shards.push_back(std::make_unique<Impl::Shard>());
    return Checkpoint(std::move(impl));
}

Checkpoint Checkpoint::from_description(CheckpointDescription description) {
    auto impl = std::make_unique<Impl>();
    impl->container = std::move(description.container);
    impl->directory = std::move(description.directory);
    for (auto& file : description.files) {
        if (!is_safe_relative_name(file.name))
            throw Error(ErrorKind::internal, "a described file is not inside the model folder", {.file = file.name});
        impl->add_opened(file.name, SafetensorsFile::open_described(impl->directory / file.name, std::move(file.tensors),
                                                                   std::move(file.digest)));
    }
    impl->described_side_files.emplace();
    for (auto& [name, content] : description.side_files) impl->described_side_files->emplace(std::move(name), std::move(content));
    return Checkpoint(std::move(impl));
}

const fs::path& Checkpoint::directory() const noexcept { return impl_->directory; }
const std::string& Checkpoint::container() const noexcept { return impl_->container; }
const std::optional<fs::path>& Checkpoint::index_path() const noexcept { return impl_->index; }
const std::vector<std::string>& Checkpoint::shard_names() const noexcept { return impl_->shard_names; }
const std::vector<std::string>& Checkpoint::tensor_names() const {
    std::call_once(impl_->names_sorted, [this] {
        impl_->tensor_names.reserve(impl_->shard_of.size());
        for (const auto& [name, shard] : impl_->shard_of) impl_->tensor_names.push_back(name);
        std::sort(impl_->tensor_names.begin(), impl_->tensor_names.end());
    });
    return impl_->tensor_names;
}

std::size_t Checkpoint::tensor_count() const noexcept { return impl_->shard_of.size(); }

bool Checkpoint::contains(std::string_view tensor) const noexcept {
    return impl_->shard_of.find(std::string(tensor)) != impl_->shard_of.end();
}

const std::string& Checkpoint::shard_of(std::string_view tensor) const {
    return impl_->shard_names[impl_->shard_index_of(tensor)];
}

const SafetensorsFile& Checkpoint::shard(const std::string& shard_name) const {
    auto it = impl_->shard_index.find(shard_name);
    if (it == impl_->shard_index.end())
        throw Error(ErrorKind::internal, "not a shard of this checkpoint", {.file = shard_name});
    return impl_->shard(it->second);
}

const TensorInfo& Checkpoint::info(std::string_view tensor) const {
    return impl_->info_in_shard(tensor, impl_->shard_index_of(tensor));
}

TensorView Checkpoint::view(std::string_view tensor) const {
    std::size_t shard = impl_->shard_index_of(tensor);
    return impl_->shard(shard).view(impl_->info_in_shard(tensor, shard));
}

void Checkpoint::release_pages(std::string_view tensor) const {
    std::size_t shard = impl_->shard_index_of(tensor);
    impl_->shard(shard).release_pages(impl_->info_in_shard(tensor, shard));
}

void Checkpoint::validate_all() const {
    for (const auto& [name, shard] : impl_->shard_of) impl_->info_in_shard(name, shard);
    for (std::size_t i = 0; i < impl_->shard_names.size(); ++i) {
        const SafetensorsFile& file = impl_->shard(i);
        for (const auto& t : file.tensors()) {
            auto it = impl_->shard_of.find(t.name);
            if (it == impl_->shard_of.end() || it->second != i)
                throw Error(ErrorKind::input,
                            it == impl_->shard_of.end()
                                ? "the shard holds a tensor that the index does not list"
                                : "the shard holds a tensor that the index places in " +
                                      impl_->shard_names[it->second],
                            {.file = file.path().string(), .tensor = t.name, .code = "IndexMismatch"});
        }
    }
}

bool Checkpoint::has_config() const {
    if (impl_->described_side_files) return impl_->described_side_files->count("config.json") > 0;
    std::error_code ec;
    return fs::exists(impl_->directory / "config.json", ec);  // reading it refuses what is not a regular file
}

ModelConfig Checkpoint::config() const {
    if (impl_->described_side_files) {
        auto it = impl_->described_side_files->find("config.json");
        if (it == impl_->described_side_files->end())
            throw Error(ErrorKind::input, "the model's metadata gives no config.json",
                        {.file = impl_->directory.string(), .code = "MissingConfig"});
        // Messages name the model's first file: the config stands for its metadata.
        return ModelConfig::parse(it->second, (impl_->directory / impl_->shard_names.front()).string());
    }
    return ModelConfig::load(impl_->directory / "config.json");
}

std::optional<std::string> Checkpoint::side_file(std::string_view name) const {
    if (impl_->described_side_files) {
        auto it = impl_->described_side_files->find(name);
        if (it == impl_->described_side_files->end()) return std::nullopt;
        return it->second;
    }
    const fs::path file = impl_->directory / std::string(name);
    std::error_code ec;
    if (!fs::exists(file, ec)) return std::nullopt;
    return read_small_file(file, tokenizer_file_limit);  // the largest side file: a tokenizer.json
}

}  // namespace moequant

// ---- weights through their encodings (checkpoint/weight_catalog.cpp) ----

namespace moequant {

void Checkpoint::use_encodings(std::vector<const SourceEncoding*> encodings) {
    impl_->catalog.use_encodings(std::move(encodings));
}
const std::vector<const SourceEncoding*>& Checkpoint::encodings() const noexcept { return impl_->catalog.encodings(); }
const EncodedWeight& Checkpoint::weight(std::string_view name) const { return impl_->catalog.require(*this, name); }
const EncodedWeight* Checkpoint::find_weight(std::string_view name) const { return impl_->catalog.find(*this, name); }
const EncodedWeight* Checkpoint::weight_holding(std::string_view tensor) const {
    return impl_->catalog.holding(*this, tensor);
}

}  // namespace moequant
