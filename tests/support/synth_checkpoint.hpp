// Checkpoints the host synthesizes (`moequant synth`) for the integration tests.
#pragma once

#include "test_support.hpp"

#include <string>
#include <vector>

namespace moequant::test {

struct SynthSource {
    std::string family;
    std::string dtype = {};   // the host's default when empty
    std::string layout = {};  // likewise
};

// `moequant synth` of `source` into `out`, `extra` arguments after; the test stops if it fails.
void synth_checkpoint(const fs::path& out, const SynthSource& source, const std::vector<std::string>& extra = {});

// A command line the host must refuse before it writes anything: its exit code (2 usage, 3
// input) and a part of its error line.
struct ExpectedRefusal {
    std::vector<std::string> args;
    int exit_code = 2;
    std::string message;
};
// Runs each refusal and checks its exit code, its message, and that `output` was not created.
void check_refusals(const std::vector<ExpectedRefusal>& refusals, const fs::path& output);

// The checkpoint of `family` in `dtype`, synthesized into <dir>/<family>-<dtype>.
fs::path synth_checkpoint_in(const TempDir& dir, const std::string& family, const std::string& dtype);

}  // namespace moequant::test
