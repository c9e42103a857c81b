#include <moequant/digest.hpp>
#include <moequant/error.hpp>
#include <moequant/input_file.hpp>
#include <moequant/safetensors_reader.hpp>

#include "files/mapped_file.hpp"
#include "torch/torch_checkpoint.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace moequant {
namespace {

[[noreturn]] void reject(const std::string& file, const std::string& message, const std::string& code) {
    throw Error(ErrorKind::input, message, ErrorContext{.file = file, .code = code});
}

std::uint64_t read_le64(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// The first three checks of the reference reader, which only need the length prefix.
std::uint64_t checked_header_length(std::uint64_t file_size, const unsigned char* prefix, const std::string& file) {
    if (file_size < 8)
        reject(file, "the file has " + std::to_string(file_size) + " bytes, fewer than the 8-byte header length",
               "HeaderTooSmall");
    if (prefix[0] == 'G' && prefix[1] == 'G' && prefix[2] == 'U' && prefix[3] == 'F')  // a common mix-up, named as such
        reject(file, "is a GGUF file, not safetensors", "GgufNotSafetensors");
    std::uint64_t n = read_le64(prefix);
    if (n > safetensors_max_header_size)
        reject(file, "header length " + std::to_string(n) + " exceeds the limit of " +
                         std::to_string(safetensors_max_header_size) + " bytes",
               "HeaderTooLarge");
    if (8 + n > file_size)
        reject(file, "header length " + std::to_string(n) + " runs past the end of the file (8 + " +
                         std::to_string(n) + " > " + std::to_string(file_size) + " bytes)",
               "InvalidHeaderLength");
    return n;
}

}  // namespace

struct SafetensorsFile::Impl {
    std::filesystem::path path;
    std::string display_name;
    SafetensorsHeader header;
    std::uint64_t header_length = 0;
    std::uint64_t data_start = 0;
    std::uint64_t file_size = 0;
    std::unordered_map<std::string_view, std::size_t> by_name;
    std::string header_digest;

    // Data access: either an image given by the caller or a lazily created mapping.
    InputFile input;  // open until mapped
    std::once_flag map_once;
    detail::MappedFile mapping;
    std::span<const std::byte> image;

    void index_names() {
        by_name.reserve(header.tensors.size());
        for (std::size_t i = 0; i < header.tensors.size(); ++i) by_name.emplace(header.tensors[i].name, i);
    }

    // A PyTorch checkpoint in `image`: the header over the whole file.
    void read_pytorch() {
        detail::TorchCheckpoint checkpoint = detail::read_torch_checkpoint(image, display_name);
        header = std::move(checkpoint.header);
        header_digest = std::move(checkpoint.pickle_digest);
        header_length = 0;
        data_start = 0;
        index_names();
    }

    std::span<const std::byte> data() {
        std::call_once(map_once, [this] {
            if (!image.empty() || input.fd() < 0) return;
            struct stat st{};
            if (::fstat(input.fd(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != file_size)
                throw Error(ErrorKind::input, "the file changed size since its header was read",
                            {.file = display_name, .code = "FileTruncated"});
            mapping = detail::MappedFile(input.fd(), static_cast<std::size_t>(file_size), path);
            image = mapping.bytes();
            input = InputFile();
        });
        return image;
    }
};

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->display_name = path.string();
    const std::string& name = impl->display_name;

    impl->input = InputFile::open(path);
    impl->file_size = impl->input.size();

    unsigned char prefix[8] = {};
    if (impl->file_size >= 8) impl->input.read_at(prefix, 8, 0);
    impl->header_length = checked_header_length(impl->file_size, prefix, name);

    std::string header_text(static_cast<std::size_t>(impl->header_length), '\0');
    impl->input.read_at(header_text.data(), header_text.size(), 8);
    impl->header = parse_safetensors_header(header_text, impl->file_size - 8 - impl->header_length, name);
    impl->header_digest = digest_hex(std::as_bytes(std::span<const char>(header_text.data(), header_text.size())));
    impl->data_start = 8 + impl->header_length;
    impl->index_names();
    return SafetensorsFile(std::move(impl));
}

SafetensorsFile SafetensorsFile::from_bytes(std::span<const std::byte> bytes, const std::string& name) {
    auto impl = std::make_unique<Impl>();
    impl->path = name;
    impl->display_name = name;
    impl->file_size = bytes.size();
    const auto* raw = reinterpret_cast<const unsigned char*>(bytes.data());
    impl->header_length = checked_header_length(impl->file_size, raw, name);
    std::string_view header_text(reinterpret_cast<const char*>(raw) + 8,
                                 static_cast<std::size_t>(impl->header_length));
    impl->header = parse_safetensors_header(header_text, impl->file_size - 8 - impl->header_length, name);
    impl->image = bytes;
    impl->header_digest = digest_hex(std::as_bytes(std::span<const char>(header_text.data(), header_text.size())));
    impl->data_start = 8 + impl->header_length;
    impl->index_names();
    return SafetensorsFile(std::move(impl));
}

SafetensorsFile SafetensorsFile::open_pytorch(const std::filesystem::path& path) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->display_name = path.string();
    InputFile input = InputFile::open(path);
    impl->file_size = input.size();
    // The zip directory is at the end and the pickle anywhere: map it all now (only the pages
    // read are loaded). A file that shrinks while mapped ends the run as FileTruncated.
    impl->mapping = detail::MappedFile(input.fd(), static_cast<std::size_t>(impl->file_size), path);
    impl->image = impl->mapping.bytes();
    impl->read_pytorch();
    return SafetensorsFile(std::move(impl));
}

SafetensorsFile SafetensorsFile::pytorch_from_bytes(std::span<const std::byte> bytes, const std::string& name) {
    auto impl = std::make_unique<Impl>();
    impl->path = name;
    impl->display_name = name;
    impl->file_size = bytes.size();
    impl->image = bytes;
    impl->read_pytorch();
    return SafetensorsFile(std::move(impl));
}

SafetensorsFile SafetensorsFile::open_described(const std::filesystem::path& path, std::vector<TensorInfo> tensors,
                                                std::string digest) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->display_name = path.string();
    impl->input = InputFile::open(path);
    impl->file_size = impl->input.size();
    for (const TensorInfo& t : tensors) {
        if (t.end < t.begin || t.end > impl->file_size)
            reject(impl->display_name,
                   "tensor '" + t.name + "' is described at bytes " + std::to_string(t.begin) + ".." + std::to_string(t.end) +
                       ", past the end of the file (" + std::to_string(impl->file_size) + " bytes)",
                   "DescribedTensorOutsideFile");
        const auto elements = shape_elements(t.shape);
        if (!elements || *elements > (t.size_bytes() * 8) / std::max(1u, dtype_bits(t.dtype)) ||
            *elements * dtype_bits(t.dtype) / 8 != t.size_bytes())
            reject(impl->display_name, "tensor '" + t.name + "' is described with " + std::to_string(t.size_bytes()) +
                                           " bytes, which do not hold its shape in " + std::string(dtype_name(t.dtype)),
                   "DescribedTensorSize");
    }
    impl->header.tensors = std::move(tensors);
    std::sort(impl->header.tensors.begin(), impl->header.tensors.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return a.begin < b.begin; });
    for (const TensorInfo& t : impl->header.tensors) impl->header.data_size += t.size_bytes();
    impl->header_digest = std::move(digest);
    impl->index_names();
    if (impl->by_name.size() != impl->header.tensors.size())
        reject(impl->display_name, "the description names a tensor twice", "DuplicateTensor");
    return SafetensorsFile(std::move(impl));
}

const std::filesystem::path& SafetensorsFile::path() const noexcept { return impl_->path; }
const SafetensorsHeader& SafetensorsFile::header() const noexcept { return impl_->header; }
std::uint64_t SafetensorsFile::header_length() const noexcept { return impl_->header_length; }
std::uint64_t SafetensorsFile::data_start() const noexcept { return impl_->data_start; }
std::uint64_t SafetensorsFile::file_size() const noexcept { return impl_->file_size; }
std::string SafetensorsFile::header_digest() const { return impl_->header_digest; }

const TensorInfo* SafetensorsFile::find(std::string_view name) const noexcept {
    auto it = impl_->by_name.find(name);
    return it == impl_->by_name.end() ? nullptr : &impl_->header.tensors[it->second];
}

const TensorInfo& SafetensorsFile::info(std::string_view name) const {
    if (const TensorInfo* t = find(name)) return *t;
    throw Error(ErrorKind::input, "no such tensor in this file",
                {.file = impl_->display_name, .tensor = std::string(name), .code = "TensorNotFound"});
}

TensorView SafetensorsFile::view(std::string_view name) const { return view(info(name)); }

TensorView SafetensorsFile::view(const TensorInfo& info) const {
    std::span<const std::byte> bytes;
    if (info.size_bytes() > 0) bytes = impl_->data().subspan(data_start() + info.begin, info.size_bytes());
    return TensorView{info.dtype, info.shape, bytes};
}

void SafetensorsFile::release_pages(const TensorInfo& info) const noexcept {
    if (impl_->image.empty() || info.size_bytes() == 0 || impl_->mapping.bytes().empty()) return;
    const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(impl_->image.data() + data_start() + info.begin);
    const auto end = begin + info.size_bytes();
    const std::uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;  // whole pages inside
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

std::optional<std::string> SafetensorsFile::metadata(std::string_view key) const {
    for (const auto& [k, v] : impl_->header.metadata)
        if (k == key) return v;
    return std::nullopt;
}

}  // namespace moequant
