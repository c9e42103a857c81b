#include "synth_checkpoint.hpp"

#include <boost/test/unit_test.hpp>

namespace moequant::test {

void synth_checkpoint(const fs::path& out, const SynthSource& source, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"synth", "--family", source.family};
    if (!source.dtype.empty()) args.insert(args.end(), {"--dtype", source.dtype});
    if (!source.layout.empty()) args.insert(args.end(), {"--layout", source.layout});
    args.insert(args.end(), {"--out", out.string()});
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = run_moequant(args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
}

fs::path synth_checkpoint_in(const TempDir& dir, const std::string& family, const std::string& dtype) {
    const fs::path out = dir / (family + "-" + dtype);
    synth_checkpoint(out, {family, dtype});
    return out;
}

void check_refusals(const std::vector<ExpectedRefusal>& refusals, const fs::path& output) {
    for (const auto& [args, exit_code, message] : refusals) {
        std::string line;
        for (const auto& a : args) line += a + " ";
        const CommandResult r = run_moequant(args);
        BOOST_TEST(r.exit_code == exit_code, line << ": " << r.err);
        BOOST_TEST(contains(r.err, message), line << ": " << r.err);
        BOOST_TEST(!fs::exists(output), line << ": " << output << " was created");
    }
}

}  // namespace moequant::test
