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

// The checkpoint of `family` in `dtype`, synthesized into <dir>/<family>-<dtype>.
fs::path synth_checkpoint_in(const TempDir& dir, const std::string& family, const std::string& dtype);

}  // namespace moequant::test
