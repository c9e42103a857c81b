// moequant: prepares Mixture-of-Experts checkpoints for CPU-GPU hybrid inference.

#include "host_main.hpp"

int main(int argc, char** argv) { return moequant::cli::host_main(argc, argv); }
