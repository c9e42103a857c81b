#include "torch/torch_checkpoint.hpp"

#include "torch/restricted_unpickler.hpp"
#include "torch/zip_archive.hpp"

#include <moequant/checked_math.hpp>
#include <moequant/digest.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace moequant::detail {
namespace {

constexpr std::string_view pickle_name = "data.pkl";

[[noreturn]] void refuse(const std::string& file, const std::string& message, const std::string& code,
                         const std::string& tensor = {}, const std::string& hint = {}) {
    throw Error(ErrorKind::input, message, {.file = file, .tensor = tensor, .code = code, .hint = hint});
}

// The folder all records sit in (torch names it after the file's stem, or "archive"): the one
// holding data.pkl.
std::string archive_prefix(const ZipArchive& archive, const std::string& file) {
    std::string prefix;
    std::size_t found = 0;
    for (const ZipEntry& e : archive.entries()) {
        const std::size_t slash = e.name.find('/');
        if (slash != std::string::npos && slash > 0 && std::string_view(e.name).substr(slash + 1) == pickle_name) {
            if (++found > 1)
                refuse(file, "the archive holds data.pkl in two folders ('" + prefix + "' and '" + e.name.substr(0, slash) + "')",
                       "NotATorchCheckpoint");
            prefix = e.name.substr(0, slash + 1);
        }
    }
    if (found == 0)
        refuse(file, "the zip archive has no <folder>/data.pkl: it is not a torch.save checkpoint", "NotATorchCheckpoint");
    return prefix;
}

// torch >= 2.1 records the byte order of the machine that saved the file; older files are
// little-endian (torch ran on nothing else that saved this format).
void check_byte_order(const ZipArchive& archive, const std::string& prefix, const std::string& file) {
    const ZipEntry* e = archive.find(prefix + "byteorder");
    if (!e) return;
    const auto bytes = archive.bytes(*e);
    const std::string_view order(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (order == "little") return;
    if (order == "big")
        refuse(file, "the checkpoint was saved on a big-endian machine; only little-endian tensors are read", "BigEndian");
    refuse(file, "its byteorder record holds neither 'little' nor 'big'", "InvalidByteorder");
}

std::uint64_t element_bytes(DType dtype) { return dtype_bits(dtype) / 8; }

// Row-major contiguity as torch defines it: dimensions of size 1 may have any stride, and a
// tensor without elements is contiguous whatever its strides.
// (Sizes are non-negative and their product fits in 64 bits, so the partial products do too.)
bool is_contiguous(const PickledTensor& t, std::uint64_t elements) {
    if (elements == 0) return true;
    std::uint64_t expected = 1;
    for (std::size_t d = t.size.size(); d-- > 0;) {
        if (t.size[d] != 1 && (t.stride[d] < 0 || static_cast<std::uint64_t>(t.stride[d]) != expected)) return false;
        expected *= static_cast<std::uint64_t>(t.size[d]);
    }
    return true;
}

// For the message only (wraps silently where the strides could not be represented).
Shape row_major_strides(const Shape& size) {
    Shape strides(size.size());
    std::uint64_t s = 1;
    for (std::size_t d = size.size(); d-- > 0;) {
        strides[d] = static_cast<std::int64_t>(s);
        s *= static_cast<std::uint64_t>(std::max<std::int64_t>(size[d], 1));
    }
    return strides;
}

struct StorageUse {
    DType dtype;
    std::uint64_t numel;
};

TensorInfo locate(const PickledTensor& t, const ZipArchive& archive, const std::string& prefix, const std::string& file,
                  std::unordered_map<std::string, StorageUse>& storages) {
    const ErrorContext where{.file = file, .tensor = t.name, .code = "ValueOverflow"};
    if (t.size.size() != t.stride.size())
        refuse(file, "its size " + shape_to_string(t.size) + " and stride " + shape_to_string(t.stride) + " differ in length",
               "InvalidTensor", t.name);
    const std::optional<std::uint64_t> elements = shape_elements(t.size);
    if (!elements) refuse(file, "its size " + shape_to_string(t.size) + " is negative or overflows 64 bits", "InvalidTensor", t.name);
    if (!is_contiguous(t, *elements))
        refuse(file, "the tensor is not contiguous: size " + shape_to_string(t.size) + " with stride " + shape_to_string(t.stride) +
                         " (row-major is " + shape_to_string(row_major_strides(t.size)) + "); only contiguous tensors are read",
               "NonContiguousTensor", t.name, "save the tensor made contiguous (tensor.contiguous()) or convert the checkpoint");
    if (t.storage_offset < 0)
        refuse(file, "its storage offset " + std::to_string(t.storage_offset) + " is negative", "InvalidTensor", t.name);

    const std::string entry_name = prefix + "data/" + t.storage_key;
    const ZipEntry* entry = archive.find(entry_name);
    if (!entry)
        refuse(file, "its storage '" + t.storage_key + "' has no entry " + entry_name + " in the archive", "StorageMissing", t.name);
    auto [use, first] = storages.try_emplace(t.storage_key, StorageUse{t.storage_dtype, t.storage_numel});
    if (!first && (use->second.dtype != t.storage_dtype || use->second.numel != t.storage_numel))
        refuse(file, "storage '" + t.storage_key + "' is named as " + std::to_string(t.storage_numel) + " " +
                         std::string(dtype_name(t.storage_dtype)) + " elements here and as " + std::to_string(use->second.numel) +
                         " " + std::string(dtype_name(use->second.dtype)) + " elements by another tensor",
               "StorageMismatch", t.name);
    const std::uint64_t storage_bytes = checked_mul(t.storage_numel, element_bytes(t.storage_dtype), "the storage's size", where);
    if (storage_bytes != entry->size)
        refuse(file, "its storage '" + t.storage_key + "' should hold " + std::to_string(t.storage_numel) + " " +
                         std::string(dtype_name(t.storage_dtype)) + " elements (" + std::to_string(storage_bytes) +
                         " bytes), but " + entry_name + " has " + std::to_string(entry->size) + " bytes",
               "StorageSizeMismatch", t.name);

    const std::uint64_t element = element_bytes(t.dtype);
    const std::uint64_t begin = checked_mul(static_cast<std::uint64_t>(t.storage_offset), element, "the storage offset", where);
    const std::uint64_t length = checked_mul(*elements, element, "the tensor's size", where);
    const std::uint64_t end = checked_add(begin, length, "the tensor's end", where);
    if (end > entry->size)
        refuse(file, "elements " + std::to_string(t.storage_offset) + " to " + std::to_string(t.storage_offset) + " + " +
                         std::to_string(*elements) + " (" + std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.size) +
                         ") run past the end of its storage '" + t.storage_key + "' (" + std::to_string(entry->size) + " bytes)",
               "StorageOutOfBounds", t.name);
    return TensorInfo{t.name, t.dtype, t.size, entry->data_offset + begin, entry->data_offset + end};
}

}  // namespace

TorchCheckpoint read_torch_checkpoint(std::span<const std::byte> image, const std::string& file) {
    const ZipArchive archive = ZipArchive::parse(image, file);
    const std::string prefix = archive_prefix(archive, file);
    check_byte_order(archive, prefix, file);
    const ZipEntry& pickle = *archive.find(prefix + std::string(pickle_name));
    archive.verify_crc32(pickle);
    const std::vector<PickledTensor> pickled = read_state_dict_pickle(archive.bytes(pickle), file, pickle.name);

    TorchCheckpoint result;
    std::unordered_map<std::string, StorageUse> storages;
    std::unordered_set<std::string_view> names;
    result.header.tensors.reserve(pickled.size());
    for (const PickledTensor& t : pickled) {
        if (!names.insert(t.name).second) refuse(file, "the state dict holds this name twice", "DuplicateTensor", t.name);
        result.header.tensors.push_back(locate(t, archive, prefix, file, storages));
        result.header.data_size = checked_add(result.header.data_size, result.header.tensors.back().size_bytes(),
                                              "the tensors' total size", {.file = file});
    }
    std::sort(result.header.tensors.begin(), result.header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.name < b.name;
    });
    result.pickle_digest = digest_hex(archive.bytes(pickle));
    return result;
}

}  // namespace moequant::detail
