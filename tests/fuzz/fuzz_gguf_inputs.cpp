// Fuzzes the GGUF side's readers of user files: a GGUF header (gguf-split parts, a GGUF imatrix),
// a legacy or GGUF importance matrix and a tiktoken.model. The first byte picks the reader, the
// rest is the file; any content must be read or refused with a moequant::Error, never crash,
// hang or read past what it checked.
#include "gguf_container.hpp"
#include "gguf_imatrix.hpp"
#include "gguf_tiktoken_vocab.hpp"

#include <moequant/error.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace {

// One scratch folder per fuzzing process, its file rewritten for each input.
const std::filesystem::path& scratch() {
    static const std::filesystem::path dir = [] {
        auto d = std::filesystem::temp_directory_path() / ("moequant-fuzz-gguf-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        return d;
    }();
    return dir;
}

std::filesystem::path write(const std::string& name, const std::uint8_t* data, std::size_t size) {
    const auto path = scratch() / name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return path;
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
    return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    using namespace moequant::formats;
    try {
        switch (data[0] % 3) {
        case 0: {
            const GgufFile file = read_gguf_file_header(write("part.gguf", data + 1, size - 1).string(), 1u << 20);
            for (const auto& t : file.tensors) (void)file.tensor(t.name);
            break;
        }
        case 1: {
            ImatrixFile imatrix = ImatrixFile::open(write(size > 1 && data[1] == 'G' ? "imatrix.gguf" : "imatrix.dat", data + 1, size - 1));
            imatrix.check_contents();
            break;
        }
        default: {
            const auto ranks = read_tiktoken_ranks(write("tiktoken.model", data + 1, size - 1));
            (void)tiktoken_merges(ranks);
            break;
        }
        }
    } catch (const moequant::Error&) {
    }
    return 0;
}
