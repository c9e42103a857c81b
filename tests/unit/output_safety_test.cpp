// The output-safety building blocks (docs/safety.md "Output folders"): where outputs may go, what
// --overwrite may remove, the folder lock, and partial files that never follow links. The
// refusals of / and of the current folder are tested here, where a failure can remove nothing.

#include "error_code_of.hpp"
#include "test_support.hpp"

#include <moequant/engine/output_location.hpp>
#include <moequant/engine/output_lock.hpp>
#include <moequant/engine/output_overwrite.hpp>
#include <moequant/error.hpp>
#include <moequant/output_file.hpp>

#include <boost/test/unit_test.hpp>

#include <unistd.h>

using namespace moequant;
using namespace moequant::test;

namespace {

template <class F>
std::string refusal(F&& f) {
    return error_code_of(std::forward<F>(f), ErrorKind::io);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(output_safety)

BOOST_AUTO_TEST_CASE(paths_compare_by_real_components) {
    TempDir dir;
    fs::create_directories(dir / "a/b");
    fs::create_directory_symlink(dir / "a", dir / "link");
    BOOST_TEST(resolved_path(dir / "link/b/new/") == resolved_path(dir / "a/b/new"));
    BOOST_TEST(path_is_within(resolved_path(dir / "a/b"), resolved_path(dir / "a")));
    BOOST_TEST(path_is_within(resolved_path(dir / "a"), resolved_path(dir / "a")));
    BOOST_TEST(!path_is_within(resolved_path(dir / "a"), resolved_path(dir / "a/b")));
    BOOST_TEST(!path_is_within(resolved_path(dir / "ab"), resolved_path(dir / "a")));  // a name prefix is not a parent
    BOOST_TEST(path_is_within(fs::path("/x/y"), fs::path("/")));
}

BOOST_AUTO_TEST_CASE(overwrite_of_root_home_and_current_folders_is_refused) {
    TempDir dir;
    const CommandInputs none;
    for (const char* root : {"/", "//", "/tmp/..", "/./"})
        BOOST_TEST(refusal([&] { check_output_folder(root, none, true); }) == "UnsafeOverwrite", root);
    BOOST_TEST(refusal([&] { check_output_folder(".", none, true); }) == "UnsafeOverwrite");
    BOOST_TEST(refusal([&] { check_output_folder("..", none, true); }) == "UnsafeOverwrite");
    BOOST_TEST(refusal([&] { check_output_folder(fs::current_path().parent_path(), none, true); }) == "UnsafeOverwrite");
    if (const char* home = std::getenv("HOME"); home && *home)
        BOOST_TEST(refusal([&] { check_output_folder(home, none, true); }) == "UnsafeOverwrite");
    // Without --overwrite nothing is removed, so these are allowed here (the folder rules apply later).
    BOOST_TEST(refusal([&] { check_output_folder("/", none, false); }) == "");
    BOOST_TEST(refusal([&] { check_output_folder(dir / "out", none, true); }) == "");
}

BOOST_AUTO_TEST_CASE(outputs_and_inputs_never_overlap) {
    TempDir dir;
    fs::create_directories(dir / "model");
    write_text(dir / "acts.safetensors", "x");
    const CommandInputs inputs{.folders = {dir / "model"}, .files = {dir / "acts.safetensors"}};
    BOOST_TEST(refusal([&] { check_output_folder(dir / "model", inputs, false); }) == "OutputIsInput");
    BOOST_TEST(refusal([&] { check_output_folder(dir / "model/sub", inputs, false); }) == "OutputInsideInput");
    BOOST_TEST(refusal([&] { check_output_folder(dir.path(), inputs, false); }) == "OutputContainsInput");
    BOOST_TEST(refusal([&] { check_output_file(dir / "acts.safetensors", inputs, true); }) == "OutputIsInput");
    BOOST_TEST(refusal([&] { check_output_file(dir / "model/x.json", inputs, true); }) == "OutputInsideInput");
    BOOST_TEST(refusal([&] { check_output_file(dir / "new.json", inputs, false); }) == "");
    write_text(dir / "old.json", "x");
    BOOST_TEST(refusal([&] { check_output_file(dir / "old.json", inputs, false); }) == "OutputExists");
    BOOST_TEST(refusal([&] { check_output_file(dir / "old.json", inputs, true); }) == "");
    fs::create_directories(dir / "folder");
    BOOST_TEST(refusal([&] { check_output_file(dir / "folder", inputs, true); }) == "OutputNotAFile");
}

BOOST_AUTO_TEST_CASE(overwrite_clears_only_conversion_entries) {
    TempDir dir;
    const OverwriteScope conversion{.conversion_output = true};
    for (const char* f : {"model-00001-of-00002.safetensors", "model.safetensors.index.json", "moequant-run.json",
                          "config.json", "tokenizer.json", ".x.safetensors.moequant.partial"})
        write_text(dir / f, "x");
    fs::create_directories(dir / "_layer_3/_numa_0");
    write_text(dir / "_layer_3/_numa_0/INT4_down_0_64Byte_quant_.kt", "x");
    // A folder that holds no manifest is not known to be a conversion's: its shards stay.
    fs::remove(dir / "moequant-run.json");
    BOOST_TEST(refusal([&] { clear_for_overwrite(dir.path(), {}); }) == "ForeignEntry");
    BOOST_TEST(fs::exists(dir / "model-00001-of-00002.safetensors"));
    write_text(dir / "moequant-run.json", "x");
    BOOST_TEST(refusal([&] { clear_for_overwrite(dir.path(), conversion); }) == "");
    BOOST_TEST(fs::is_empty(dir.path()));
    // Anything else refuses the whole clear, before anything is removed.
    write_text(dir / "model-00001-of-00002.safetensors", "x");
    fs::create_directories(dir / "_layer_4/_numa_0");
    write_text(dir / "_layer_4/_numa_0/notes.txt", "the user's");
    BOOST_TEST(refusal([&] { clear_for_overwrite(dir.path(), conversion); }) == "ForeignEntry");
    BOOST_TEST(fs::exists(dir / "model-00001-of-00002.safetensors"));
    fs::remove_all(dir / "_layer_4");
    write_text(dir / ".mine.partial", "the user's");  // not the tool's marker
    BOOST_TEST(refusal([&] { clear_for_overwrite(dir.path(), conversion); }) == "ForeignEntry");
    // Named by the caller (an earlier manifest's files, synth's own): removed.
    BOOST_TEST(refusal([&] { clear_for_overwrite(dir.path(), {.conversion_output = true, .names = {".mine.partial"}}); }) == "");
    // Only the named files when the scope is not a conversion's (synth replacing a checkpoint).
    write_text(dir / "config.json", "x");
    write_text(dir / "model-00001-of-00009.safetensors", "x");
    BOOST_TEST(refusal([&] { clear_for_overwrite(dir.path(), {.names = {"config.json"}}); }) == "ForeignEntry");
    BOOST_TEST(fs::exists(dir / "config.json"));
}

BOOST_AUTO_TEST_CASE(the_lock_admits_one_holder_and_goes_with_it) {
    TempDir dir;
    {
        OutputFolderLock held(dir.path());
        BOOST_TEST(fs::exists(dir / output_lock_name));
        BOOST_TEST(refusal([&] { OutputFolderLock second(dir.path()); }) == "OutputLocked");
        BOOST_TEST(refusal([&] { OutputFolderLock folder(dir.path(), OutputFolderLock::Where::folder_itself); }) == "");
    }
    BOOST_TEST(!fs::exists(dir / output_lock_name));
    OutputFolderLock again(dir.path());  // a released lock never blocks
    fs::create_directories(dir / "sub");
    OutputFolderLock folder(dir / "sub", OutputFolderLock::Where::folder_itself);
    BOOST_TEST(refusal([&] { OutputFolderLock second(dir / "sub", OutputFolderLock::Where::folder_itself); }) == "OutputLocked");
}

BOOST_AUTO_TEST_CASE(partials_never_follow_links_and_are_never_shared) {
    TempDir dir;
    write_text(dir / "victim", "outside");
    const fs::path target = dir / "out.json";
    BOOST_TEST(partial_path_for(target).filename() == ".out.json.moequant.partial");
    BOOST_TEST(is_partial_name(".out.json.moequant.partial"));
    BOOST_TEST(!is_partial_name(".out.json.partial"));
    fs::create_symlink(dir / "victim", partial_path_for(target));
    write_file_atomically(target, "new");
    BOOST_TEST(read_text(dir / "victim") == "outside");
    BOOST_TEST(read_text(target) == "new");
    // A live partial (another writer) is refused; a dead one is replaced.
    {
        OutputFile live(target);
        BOOST_TEST(refusal([&] { OutputFile second(target); }) == "OutputBusy");
    }
    write_text(partial_path_for(target), "left by a killed run");
    write_file_atomically(target, "newer");
    BOOST_TEST(read_text(target) == "newer");
    BOOST_TEST(!fs::exists(partial_path_for(target)));
    // A file that appears under the final name while one is written (another run's) is kept.
    const fs::path fresh = dir / "fresh.json";
    {
        OutputFile file(fresh);
        file.append(std::string_view("mine"));
        write_text(fresh, "the other run's");
        BOOST_TEST(refusal([&] { file.commit(); }) == "OutputExists");
    }
    BOOST_TEST(read_text(fresh) == "the other run's");
    BOOST_TEST(!fs::exists(partial_path_for(fresh)));
}

BOOST_AUTO_TEST_SUITE_END()
