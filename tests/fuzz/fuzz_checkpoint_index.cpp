// Fuzzes model.safetensors.index.json: the input is written as the index of a folder holding
// real shards (the sharded fixture of safetensors.jl), then the checkpoint is opened, every
// tensor it lists is looked up and the index is cross-checked against the shards. Anything
// must end in a moequant::Error or a consistent checkpoint; never a crash or a read outside
// the folder.
#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

// A private folder with copies of the fixture's shards, made once per process.
const fs::path& model_folder() {
    static const fs::path folder = [] {
        std::string pattern = (fs::temp_directory_path() / "moequant-fuzz-index.XXXXXX").string();
        const char* made = ::mkdtemp(pattern.data());
        if (!made) std::abort();
        const fs::path dir = made;
        const fs::path fixture = fs::path(MOEQUANT_SHARED_DIR) / "fixtures/third_party/safetensors_jl_testdata/sharded";
        for (const auto& entry : fs::directory_iterator(fixture))
            if (entry.path().extension() == ".safetensors") fs::copy_file(entry.path(), dir / entry.path().filename());
        std::atexit([] {
            std::error_code ec;
            fs::remove_all(model_folder(), ec);
        });
        return dir;
    }();
    return folder;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const fs::path dir = model_folder();
    {
        std::ofstream out(dir / "model.safetensors.index.json", std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    try {
        moequant::Checkpoint checkpoint = moequant::Checkpoint::open(dir);
        for (const auto& name : checkpoint.tensor_names()) {
            try {
                (void)checkpoint.info(name);
                (void)checkpoint.view(name).size_bytes();
            } catch (const moequant::Error&) {
            }
        }
        checkpoint.validate_all();
    } catch (const moequant::Error&) {
    }
    return 0;
}
