// moe_int8_reference.cpp -- golden-vector generator for kt-kernel's MOE_INT8 expert weight files.
//
// This is moequant's own code. It does NOT reimplement kt's quantizer or AOCL's reorder: it
// #includes kt-kernel's operators/moe_kernel/la/kernel.hpp and drives
// moe_kernel::GemmKernelInt8::BufferB exactly as kt's operators/moe_kernel/moe.hpp does for the
// gate/up ('u') and down ('d') matrices (PACKED=true, PLAIN=false, the x86 values). It is linked
// with kt's own AOCL wrapper (operators/moe_kernel/mat_kernel/aocl_kernel/kernel.cpp) and a real
// AOCL-BLAS libblis built with the aocl_gemm addon. See README.md and make_vectors.sh.
//
// Usage: moe_int8_reference OUTDIR CASE CLASS N K SEED [NB]
//   CLASS  'u' (gate/up, kt default NB = GemmKernelInt8::N_BLOCK_UP_GATE = 32) or
//          'd' (down,    kt default NB = GemmKernelInt8::N_BLOCK_DOWN    = 64)
//   NB     optional; when given it must equal kt's value or it is written into kt's own runtime
//          tiling static (what kt_kernel_ext.moe.tiling.set_int8 does).
// Writes OUTDIR/CASE.input.bf16 (row-major [N,K] bf16 LE), OUTDIR/CASE.weight.bin (the nth = N/NB
// reordered blocks = kt's "_quant_.kt" bytes) and OUTDIR/CASE.scale.bin (N float32 LE = kt's
// "_scale_.kt" bytes).
//
// ---------------------------------------------------------------------------------------------
// Input generator (fully specified so other implementations can regenerate W bit-exactly):
//   out(i)  = the i-th (0-based) output of splitmix64 seeded with SEED, i.e.
//             z = SEED + (i+1)*0x9E3779B97F4A7C15 (mod 2^64);
//             z = (z ^ (z>>30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z>>27)) * 0x94D049BB133111EB;
//             z ^ (z>>31).
//   For element (r, j), e = r*K + j, a = out(2e), b = out(2e+1).
//   Row kind, decided by r (first matching rule wins):
//     r == 1           "zero":   +0.0 for even j, -0.0 for odd j            (amax = 0)
//     r == N-1         "single": all +0.0 except W[r][K-1] = -3.5            (one nonzero, last col)
//     r == 3           "ties":   W[r][0] = 127.0; for j >= 1:
//                                W[r][j] = (int)(b % 254) - 127 + 0.5       (d == 1.0 exactly, so
//                                f/d lands on .5 ties: tests round-half-away-from-zero)
//     r % 5 == 2       "wide":   sign = (b>>63) ? -1 : +1; m = 1 + ((a>>12) & 0xFFFF) / 65536;
//                                ex = -24 + (int)((b & 0xFFFF) % 35); v = sign * m * 2^ex
//     otherwise        "normal": u_t = ((a >> 16t) & 0xFFFF) / 65536 for t = 0..3;
//                                v = (u_0+u_1+u_2+u_3 - 2) * s_r,
//                                s_r = 2^((r % 7) - 3) * (1 + (r % 3) / 4)
//   All arithmetic in double, then v -> float (RNE) -> bf16 (round to nearest even on the top
//   16 bits; no NaN/Inf are generated).
// ---------------------------------------------------------------------------------------------

#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>  // kernel.hpp uses std::tuple without including <tuple> (kt gets it transitively)
#include <vector>

#include "operators/moe_kernel/la/kernel.hpp"  // kt-kernel (needs -I<kt>/kt-kernel -I<dir with llama.cpp/ggml.h>)

namespace {

using Kernel = moe_kernel::GemmKernelInt8;

uint64_t splitmix_out(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint16_t f32_to_bf16_rne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7FFFu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

uint16_t element(uint64_t seed, int n, int k, int r, int j) {
  const uint64_t e = static_cast<uint64_t>(r) * static_cast<uint64_t>(k) + static_cast<uint64_t>(j);
  const uint64_t a = splitmix_out(seed, 2 * e);
  const uint64_t b = splitmix_out(seed, 2 * e + 1);
  double v;
  if (r == 1) {
    return (j % 2 == 0) ? 0x0000 : 0x8000;
  } else if (r == n - 1) {
    v = (j == k - 1) ? -3.5 : 0.0;
  } else if (r == 3) {
    v = (j == 0) ? 127.0 : static_cast<double>(static_cast<int>(b % 254) - 127) + 0.5;
  } else if (r % 5 == 2) {
    const double sign = (b >> 63) ? -1.0 : 1.0;
    const double m = 1.0 + static_cast<double>((a >> 12) & 0xFFFF) / 65536.0;
    const int ex = -24 + static_cast<int>((b & 0xFFFF) % 35);
    v = sign * std::ldexp(m, ex);
  } else {
    double s = 0;
    for (int t = 0; t < 4; t++) s += static_cast<double>((a >> (16 * t)) & 0xFFFF) / 65536.0;
    const double sr = std::ldexp(1.0, (r % 7) - 3) * (1.0 + (r % 3) / 4.0);
    v = (s - 2.0) * sr;
  }
  return f32_to_bf16_rne(static_cast<float>(v));
}

void write_file(const std::string& path, const void* p, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot open " + path);
  if (n && std::fwrite(p, 1, n, f) != n) throw std::runtime_error("short write " + path);
  std::fclose(f);
}

// Runs kt's online quantization for one matrix, as moe.hpp does, into a buffer pre-filled with
// `fill` (kt uses uninitialised aligned_alloc memory; running twice with different fills proves
// every output byte is written).
std::vector<uint8_t> kt_quantize(std::vector<uint16_t>& w, int n, int k, char cls, uint8_t fill,
                                 size_t* reorder_block_bytes) {
  const size_t size = Kernel::BufferB::required_size(n, k, PACKED, cls, /*plain=*/false);
  const size_t alloc = (size + 63) / 64 * 64;
  void* buf = std::aligned_alloc(64, alloc);
  if (!buf) throw std::bad_alloc();
  std::memset(buf, fill, alloc);
  {
    Kernel::BufferB bb(n, k, buf, PACKED, cls, /*plain=*/false);
    const int nth = (cls == 'u') ? Kernel::recommended_nth_up_gate(n) : Kernel::recommended_nth_down(n);
    for (int ith = 0; ith < nth; ith++) {
      bb.from_mat(reinterpret_cast<ggml_bf16_t*>(w.data()), ith, nth, -1, PACKED, /*plain=*/false);
    }
    if (bb.nth_B * bb.reorder_B_size + sizeof(float) * n != size)
      throw std::runtime_error("required_size != nth_B*reorder_B_size + 4n");
    if (reinterpret_cast<uint8_t*>(bb.b_pack[0]) != buf ||
        reinterpret_cast<uint8_t*>(bb.d) != static_cast<uint8_t*>(buf) + bb.nth_B * bb.reorder_B_size)
      throw std::runtime_error("unexpected BufferB layout");
    *reorder_block_bytes = bb.reorder_B_size;
  }
  std::vector<uint8_t> out(static_cast<uint8_t*>(buf), static_cast<uint8_t*>(buf) + size);
  std::free(buf);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr, "usage: %s OUTDIR CASE CLASS(u|d) N K SEED [NB]\n", argv[0]);
    return 2;
  }
  try {
    const std::string outdir = argv[1], name = argv[2];
    const char cls = argv[3][0];
    const int n = std::atoi(argv[4]), k = std::atoi(argv[5]);
    const uint64_t seed = std::strtoull(argv[6], nullptr, 0);
    if ((cls != 'u' && cls != 'd') || argv[3][1] != '\0' || n <= 0 || k <= 0)
      throw std::invalid_argument("bad CLASS/N/K");
    int& kt_nb = (cls == 'u') ? Kernel::N_BLOCK_UP_GATE : Kernel::N_BLOCK_DOWN;
    if (argc == 8) {
      const int nb = std::atoi(argv[7]);
      if (nb != kt_nb) {
        std::fprintf(stderr, "note: overriding kt tiling %s %d -> %d\n",
                     cls == 'u' ? "N_BLOCK_UP_GATE" : "N_BLOCK_DOWN", kt_nb, nb);
        kt_nb = nb;
      }
    }

    std::vector<uint16_t> w(static_cast<size_t>(n) * k);
    for (int r = 0; r < n; r++)
      for (int j = 0; j < k; j++) w[static_cast<size_t>(r) * k + j] = element(seed, n, k, r, j);
    const std::vector<uint16_t> w_orig = w;

    size_t rb = 0, rb2 = 0;
    std::vector<uint8_t> out = kt_quantize(w, n, k, cls, 0x00, &rb);
    std::vector<uint8_t> out2 = kt_quantize(w, n, k, cls, 0xFF, &rb2);
    if (out != out2 || rb != rb2) throw std::runtime_error("output depends on initial buffer contents");
    if (w != w_orig) throw std::runtime_error("from_mat modified its input");

    const size_t scale_bytes = sizeof(float) * n;
    const size_t weight_bytes = out.size() - scale_bytes;
    write_file(outdir + "/" + name + ".input.bf16", w.data(), w.size() * 2);
    write_file(outdir + "/" + name + ".weight.bin", out.data(), weight_bytes);
    write_file(outdir + "/" + name + ".scale.bin", out.data() + weight_bytes, scale_bytes);
    std::printf("%s class=%c n=%d k=%d NB=%d seed=%" PRIu64 " nth=%zu reorder_block_bytes=%zu weight_bytes=%zu scale_bytes=%zu\n",
                name.c_str(), cls, n, k, kt_nb, seed, weight_bytes / rb, rb, weight_bytes, scale_bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
