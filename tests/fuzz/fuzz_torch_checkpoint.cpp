// Fuzzes the PyTorch .bin reader (zip container, restricted unpickler, tensor layout). An input
// that starts with "PK" is a whole archive; anything else is a pickle, which this target wraps
// in a torch-like archive (CRC 0, which the reader does not check, so mutations of the pickle
// are not all lost to a CRC mismatch) with sixteen 64-byte storages data/0 ... data/15. Either
// must end in a moequant::Error or in views that lie inside the buffer; never a crash, a hang
// or an allocation out of proportion to the input.
#include <moequant/error.hpp>
#include <moequant/safetensors_reader.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void le(std::vector<std::uint8_t>& out, std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

// A STORED zip of the pickle and the storages, CRCs left 0.
std::vector<std::uint8_t> wrap_pickle(const std::uint8_t* pickle, std::size_t size) {
    struct Entry {
        std::string name;
        std::uint64_t offset, size;
    };
    std::vector<Entry> entries;
    std::vector<std::uint8_t> out;
    auto add = [&](const std::string& name, const std::uint8_t* data, std::size_t n) {
        entries.push_back({name, out.size(), n});
        le(out, 0x04034b50, 4);
        le(out, 20, 2);
        le(out, 0, 2);
        le(out, 0, 2);
        le(out, 0, 4);
        le(out, 0, 4);
        le(out, n, 4);
        le(out, n, 4);
        le(out, name.size(), 2);
        le(out, 0, 2);
        out.insert(out.end(), name.begin(), name.end());
        out.insert(out.end(), data, data + n);
    };
    add("archive/data.pkl", pickle, size);
    std::uint8_t storage[64];
    for (int i = 0; i < 64; ++i) storage[i] = static_cast<std::uint8_t>(i * 37);
    for (int key = 0; key < 16; ++key) add("archive/data/" + std::to_string(key), storage, sizeof storage);
    const std::uint64_t directory = out.size();
    for (const Entry& e : entries) {
        le(out, 0x02014b50, 4);
        le(out, 20, 2);
        le(out, 20, 2);
        le(out, 0, 2);
        le(out, 0, 2);
        le(out, 0, 4);
        le(out, 0, 4);
        le(out, e.size, 4);
        le(out, e.size, 4);
        le(out, e.name.size(), 2);
        le(out, 0, 2);
        le(out, 0, 2);
        le(out, 0, 2);
        le(out, 0, 2);
        le(out, 0, 4);
        le(out, e.offset, 4);
        out.insert(out.end(), e.name.begin(), e.name.end());
    }
    const std::uint64_t directory_size = out.size() - directory;
    le(out, 0x06054b50, 4);
    le(out, 0, 4);
    le(out, entries.size(), 2);
    le(out, entries.size(), 2);
    le(out, directory_size, 4);
    le(out, directory, 4);
    le(out, 0, 2);
    return out;
}

void check(std::span<const std::byte> bytes) {
    try {
        const auto file = moequant::SafetensorsFile::pytorch_from_bytes(bytes, "fuzz.bin");
        if (file.header_length() != 0 || file.data_start() != 0) std::abort();
        unsigned sum = 0;
        for (const auto& t : file.tensors()) {
            const moequant::TensorView v = file.view(t);
            if (v.size_bytes() != t.size_bytes()) std::abort();
            if (!v.bytes.empty() && (v.data() < bytes.data() || v.data() + v.size_bytes() > bytes.data() + bytes.size()))
                std::abort();
            for (std::byte b : v.bytes) sum += static_cast<unsigned>(b);  // every byte readable (ASan)
        }
        if (sum == 0xFFFFFFFFu) std::abort();  // keeps the loop
    } catch (const moequant::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
        check(std::as_bytes(std::span<const std::uint8_t>(data, size)));
    } else {
        const std::vector<std::uint8_t> archive = wrap_pickle(data, size);
        check(std::as_bytes(std::span<const std::uint8_t>(archive)));
    }
    return 0;
}
