// Fuzzes the PyTorch .bin reader (zip container, restricted unpickler, tensor layout). An input
// that starts with "PK" is a whole archive; anything else is a pickle, which this target wraps
// in a torch-like archive (with the pickle's CRC, so mutations of the pickle are not lost to a
// CRC mismatch) with sixteen 64-byte storages data/0 ... data/15. Either
// must end in a moequant::Error or in views that lie inside the buffer; never a crash, a hang
// or an allocation out of proportion to the input.
#include <moequant/error.hpp>
#include <moequant/safetensors_reader.hpp>

#include "zip_writer.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// A torch-like STORED zip of the pickle and sixteen 64-byte storages (the test support's writer,
// which records the pickle's true CRC, so a mutated pickle still reaches the unpickler).
std::vector<std::uint8_t> wrap_pickle(const std::uint8_t* pickle, std::size_t size) {
    moequant::test::ZipWriter zip;
    zip.add("archive/data.pkl", std::vector<std::uint8_t>(pickle, pickle + size));
    std::vector<std::uint8_t> storage(64);
    for (int i = 0; i < 64; ++i) storage[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i * 37);
    for (int key = 0; key < 16; ++key) zip.add("archive/data/" + std::to_string(key), storage);
    return zip.finish();
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
