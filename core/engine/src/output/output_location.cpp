#include <moequant/engine/output_location.hpp>
#include <moequant/error.hpp>

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>

namespace moequant {

namespace fs = std::filesystem;

namespace {

// The folders --overwrite must never empty, with why: emptying one of them would remove the
// system, the user's files or the folder the user stands in.
std::vector<std::pair<fs::path, std::string>> protected_folders() {
    std::vector<std::pair<fs::path, std::string>> out = {{fs::path("/"), "the root folder"}};
    if (const char* home = std::getenv("HOME"); home && *home) out.emplace_back(resolved_path(home), "the home folder");
    if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir && *pw->pw_dir)
        out.emplace_back(resolved_path(pw->pw_dir), "the home folder");
    std::error_code ec;
    const fs::path cwd = resolved_path(fs::current_path(ec));
    if (ec) return out;
    out.emplace_back(cwd, "the current folder");
    for (fs::path p = cwd.parent_path(); !p.empty(); p = p.parent_path()) {
        out.emplace_back(p, "a folder holding the current folder");
        if (p == p.root_path()) break;
    }
    return out;
}

[[noreturn]] void refuse(const std::string& message, const fs::path& output, const char* code, const std::string& hint) {
    throw Error(ErrorKind::io, message, {.file = output.string(), .code = code, .hint = hint});
}

// The checks shared by folder and file outputs: never an input, never inside an input folder.
void check_against_inputs(const fs::path& output, const fs::path& real, const CommandInputs& inputs, const char* what) {
    const std::string hint = "choose an output outside the input model";
    for (const auto& folder : inputs.folders) {
        const fs::path input = resolved_path(folder);
        if (real == input)
            refuse(std::string("the ") + what + " is the input model folder " + input.string(), output, "OutputIsInput", hint);
        if (path_is_within(real, input))
            refuse(std::string("the ") + what + " lies inside the input model folder " + input.string(), output,
                   "OutputInsideInput", hint);
        if (path_is_within(input, real))
            refuse(std::string("the ") + what + " contains the input model folder " + input.string(), output,
                   "OutputContainsInput", hint);
    }
    for (const auto& file : inputs.files) {
        const fs::path input = resolved_path(file);
        if (real == input) refuse(std::string("the ") + what + " is the input file " + input.string(), output, "OutputIsInput", hint);
        if (path_is_within(input, real))
            refuse(std::string("the ") + what + " contains the input file " + input.string(), output, "OutputContainsInput", hint);
    }
}

}  // namespace

fs::path resolved_path(const fs::path& path) {
    std::error_code ec;
    fs::path absolute = fs::absolute(path, ec);
    if (ec) absolute = path;
    fs::path real = fs::weakly_canonical(absolute, ec);
    if (ec) real = absolute;
    real = real.lexically_normal();
    // "/a/b/" and "/a/b" are one folder.
    if (real.has_filename() || real == real.root_path()) return real;
    return real.parent_path();
}

bool path_is_within(const fs::path& inner, const fs::path& outer) {
    auto i = inner.begin();
    for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
        if (o->empty()) continue;  // a trailing separator
        if (i == inner.end() || *i != *o) return false;
    }
    return true;
}

void check_output_folder(const fs::path& output, const CommandInputs& inputs, bool overwrite) {
    const fs::path real = resolved_path(output);
    check_against_inputs(output, real, inputs, "output folder");
    if (!overwrite) return;
    for (const auto& [folder, what] : protected_folders())
        if (real == folder)
            refuse("--overwrite would empty " + real.string() + ", " + what, output, "UnsafeOverwrite",
                   "name a dedicated output folder");
}

void check_output_file(const fs::path& output, const CommandInputs& inputs, bool overwrite) {
    const fs::path real = resolved_path(output);
    check_against_inputs(output, real, inputs, "output file");
    std::error_code ec;
    const fs::file_status status = fs::status(output, ec);
    if (!fs::exists(status)) return;
    if (!fs::is_regular_file(status))
        refuse("the output path exists and is not a regular file", output, "OutputNotAFile", "name a file to write");
    if (!overwrite) refuse("the output file already exists", output, "OutputExists", "choose another name or pass --overwrite");
}

}  // namespace moequant
