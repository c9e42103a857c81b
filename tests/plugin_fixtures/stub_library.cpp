// A dependency of the missing_dep fixture; it is kept off the loader path on purpose.
extern "C" __attribute__((visibility("default"))) int moequant_fixture_stub_value() { return 42; }
