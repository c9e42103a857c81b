#include <moequant/error.hpp>
#include <moequant/output_file.hpp>
#include <moequant/safetensors_writer.hpp>

#include "base/json_text.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace moequant {

Metadata default_safetensors_metadata() { return {{"format", "pt"}}; }

std::uint64_t safetensors_file_size(std::vector<TensorSpec> tensors, const Metadata& metadata) {
    const auto [header, layout] = plan_safetensors_layout(std::move(tensors), metadata);
    std::uint64_t bytes = 8 + header.size();
    for (const auto& t : layout) bytes += t.size_bytes();
    return bytes;
}

std::pair<std::string, std::vector<TensorInfo>> plan_safetensors_layout(std::vector<TensorSpec> tensors,
                                                                         const Metadata& metadata) {
    std::unordered_set<std::string_view> names;
    for (const auto& t : tensors) {
        if (t.name.empty()) throw_input_error("a tensor to write has an empty name");
        if (t.name == "__metadata__") throw_input_error("'__metadata__' is reserved and cannot name a tensor");
        if (!names.insert(t.name).second) throw_input_error("tensor declared twice for one file", {.tensor = t.name});
    }
    std::unordered_set<std::string_view> keys;
    for (const auto& [k, v] : metadata)
        if (!keys.insert(k).second) throw_input_error("__metadata__ key '" + k + "' given twice");

    // The reference order: descending dtype (enum order), then name (byte-wise).
    std::sort(tensors.begin(), tensors.end(), [](const TensorSpec& a, const TensorSpec& b) {
        if (a.dtype != b.dtype) return a.dtype > b.dtype;
        return a.name < b.name;
    });

    std::string header = "{";
    bool first = true;
    if (!metadata.empty()) {
        header += "\"__metadata__\":{";
        for (std::size_t i = 0; i < metadata.size(); ++i) {
            if (i) header += ',';
            detail::append_json_string(header, metadata[i].first);
            header += ':';
            detail::append_json_string(header, metadata[i].second);
        }
        header += '}';
        first = false;
    }
    std::vector<TensorInfo> layout;
    layout.reserve(tensors.size());
    std::uint64_t offset = 0;
    for (auto& t : tensors) {
        auto elements = shape_elements(t.shape);
        auto bytes = elements ? dtype_byte_size(t.dtype, *elements) : std::nullopt;
        if (!bytes)
            throw_input_error(std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.shape) +
                                  " is not a valid tensor size",
                              {.tensor = t.name});
        if (!first) header += ',';
        first = false;
        detail::append_json_string(header, t.name);
        header += ":{\"dtype\":\"";
        header += dtype_name(t.dtype);
        header += "\",\"shape\":";
        header += shape_to_string(t.shape);
        header += ",\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + *bytes) + "]}";
        layout.push_back(TensorInfo{std::move(t.name), t.dtype, std::move(t.shape), offset, offset + *bytes});
        offset += *bytes;
    }
    header += '}';
    header.resize((header.size() + 7) / 8 * 8, ' ');
    if (header.size() > safetensors_max_header_size)
        throw_input_error("the header would be " + std::to_string(header.size()) + " bytes, above the " +
                          std::to_string(safetensors_max_header_size) + "-byte limit of the format");
    return {std::move(header), std::move(layout)};
}

struct SafetensorsWriter::Impl {
    std::filesystem::path path;
    std::vector<TensorInfo> layout;
    std::vector<std::uint64_t> written;  // bytes written per tensor, parallel to layout
    std::unordered_map<std::string_view, std::size_t> by_name;
    std::uint64_t data_start = 0;
    std::uint64_t file_size = 0;
    std::unique_ptr<OutputFile> file;

    std::size_t index_of(std::string_view name) const {
        auto it = by_name.find(name);
        if (it == by_name.end())
            throw Error(ErrorKind::internal, "tensor was not declared when the file was planned",
                        {.file = path.string(), .tensor = std::string(name)});
        return it->second;
    }
};

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors, Metadata metadata)
    : impl_(std::make_unique<Impl>()) {
    impl_->path = std::move(path);
    std::string header;
    try {
        std::tie(header, impl_->layout) = plan_safetensors_layout(std::move(tensors), metadata);
    } catch (const Error& e) {
        throw e.with_context({.file = impl_->path.string()});
    }
    impl_->written.assign(impl_->layout.size(), 0);
    for (std::size_t i = 0; i < impl_->layout.size(); ++i) impl_->by_name.emplace(impl_->layout[i].name, i);
    impl_->data_start = 8 + header.size();
    impl_->file_size = impl_->data_start + (impl_->layout.empty() ? 0 : impl_->layout.back().end);

    impl_->file = std::make_unique<OutputFile>(impl_->path, impl_->file_size);
    unsigned char prefix[8];
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
    impl_->file->append(std::as_bytes(std::span<const unsigned char>(prefix, 8)));
    impl_->file->append(header);
}

SafetensorsWriter::~SafetensorsWriter() = default;
SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&&) noexcept = default;
SafetensorsWriter& SafetensorsWriter::operator=(SafetensorsWriter&&) noexcept = default;

void SafetensorsWriter::write(std::string_view name, std::span<const std::byte> bytes) {
    std::size_t i = impl_->index_of(name);
    const TensorInfo& t = impl_->layout[i];
    if (bytes.size() != t.size_bytes() || impl_->written[i] != 0)
        throw Error(ErrorKind::internal,
                    impl_->written[i] != 0 ? "tensor written twice"
                                           : "got " + std::to_string(bytes.size()) + " bytes, expected " +
                                                 std::to_string(t.size_bytes()),
                    {.file = impl_->path.string(), .tensor = t.name});
    write_chunk(name, bytes);
}

void SafetensorsWriter::write(std::string_view name, const TensorView& view) {
    std::size_t i = impl_->index_of(name);
    const TensorInfo& t = impl_->layout[i];
    if (view.dtype != t.dtype || view.shape != t.shape)
        throw Error(ErrorKind::internal,
                    "got " + std::string(dtype_name(view.dtype)) + " " + shape_to_string(view.shape) +
                        ", declared " + std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.shape),
                    {.file = impl_->path.string(), .tensor = t.name});
    write(name, view.bytes);
}

void SafetensorsWriter::write_chunk(std::string_view name, std::span<const std::byte> bytes) {
    std::size_t i = impl_->index_of(name);
    const TensorInfo& t = impl_->layout[i];
    if (impl_->written[i] + bytes.size() > t.size_bytes())
        throw Error(ErrorKind::internal,
                    "chunks add up to more than the tensor's " + std::to_string(t.size_bytes()) + " bytes",
                    {.file = impl_->path.string(), .tensor = t.name});
    impl_->file->write_at(impl_->data_start + t.begin + impl_->written[i], bytes);
    impl_->written[i] += bytes.size();
}

void SafetensorsWriter::finish() {
    for (std::size_t i = 0; i < impl_->layout.size(); ++i)
        if (impl_->written[i] != impl_->layout[i].size_bytes())
            throw Error(ErrorKind::internal,
                        "only " + std::to_string(impl_->written[i]) + " of " +
                            std::to_string(impl_->layout[i].size_bytes()) + " bytes were written",
                        {.file = impl_->path.string(), .tensor = impl_->layout[i].name});
    impl_->file->commit();
}

const std::filesystem::path& SafetensorsWriter::path() const noexcept { return impl_->path; }
const std::vector<TensorInfo>& SafetensorsWriter::layout() const noexcept { return impl_->layout; }
std::uint64_t SafetensorsWriter::file_size() const noexcept { return impl_->file_size; }

}  // namespace moequant
