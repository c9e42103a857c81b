// Golden vectors for moequant's GGUF quant types: ggml's own ggml_quantize_chunk() and its
// to_float dequantizers (libggml-base of a pinned ggml commit, built with ggml's default flags:
// no -march, no FMA contraction), on rows moequant's test reads back.
//
// Inputs (input.f32, ROWS x COLS little-endian float32) are drawn here, not by moequant: row r
// is one of the kinds below, each value from a SplitMix64 stream (seed 0x6767 + r) mapped to
// roughly normal values (the sum of four uniforms), times the row's magnitude. The importance
// matrix (imatrix.f32, COLS floats) is 0.05 + |normal| per column.
//
// For every type: TYPE.q (the quantized rows, no imatrix), TYPE.imatrix.q (with it; the same
// bytes for types that ignore it), TYPE.f32 (ggml's to_float of TYPE.q). cases.json lists them
// with ggml's type id, block size and bytes per block.
//
// usage: make_vectors OUT_DIR   (build: make_vectors.sh)
#include "ggml.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 12, COLS = 512 };

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float normal(uint64_t *state) {
    float acc = 0;
    for (int i = 0; i < 4; ++i) acc += (float)(splitmix64(state) >> 40) / 16777216.0f - 0.5f;
    return acc * 1.7320508f;  // unit variance
}

// Row kinds: plain gaussian rows at several magnitudes, and the edges quantizers treat apart.
static void fill_row(int r, float *x) {
    uint64_t state = 0x6767u + (uint64_t)r;
    static const float magnitude[] = {0.02f, 1.0f, 3e-4f, 250.0f};
    for (int c = 0; c < COLS; ++c) x[c] = normal(&state);
    switch (r) {
    case 0: case 1: case 2: case 3:
        for (int c = 0; c < COLS; ++c) x[c] *= magnitude[r];
        break;
    case 4:  // all zero
        memset(x, 0, sizeof(float) * COLS);
        break;
    case 5:  // one constant value (max == min in every block)
        for (int c = 0; c < COLS; ++c) x[c] = 0.375f;
        break;
    case 6:  // one outlier per 256-block, the rest small
        for (int c = 0; c < COLS; ++c) x[c] = 0.01f * x[c] + (c % 256 == 17 ? 4.0f : 0.0f);
        break;
    case 7:  // exact ties: multiples of 1/8 in [-2, 2]
        for (int c = 0; c < COLS; ++c) x[c] = (float)((int)(x[c] * 8.0f) % 17) / 8.0f;
        break;
    case 8:  // all non-negative, then all non-positive half
        for (int c = 0; c < COLS; ++c) x[c] = c < COLS / 2 ? fabsf(x[c]) : -fabsf(x[c]);
        break;
    case 9:  // blocks of zeros between gaussian blocks (zero sub-blocks inside super-blocks)
        for (int c = 0; c < COLS; ++c) x[c] = (c / 16) % 3 == 1 ? 0.0f : 0.1f * x[c];
        break;
    case 10:  // tiny values near the fp16 subnormal range, and below GROUP_MAX_EPS in places
        for (int c = 0; c < COLS; ++c) x[c] *= (c / 32) % 2 ? 1e-6f : 1e-17f;
        break;
    default:  // BF16-representable values, as a BF16 checkpoint decodes them
        for (int c = 0; c < COLS; ++c) {
            float v = 0.05f * x[c];
            uint32_t bits;
            memcpy(&bits, &v, 4);
            bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
            memcpy(&x[c], &bits, 4);
        }
        break;
    }
}

static void write_file(const char *dir, const char *name, const void *data, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_vectors OUT_DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    static float x[ROWS * COLS], imatrix[COLS], back[ROWS * COLS];
    for (int r = 0; r < ROWS; ++r) fill_row(r, x + r * COLS);
    uint64_t state = 0x1A7812u;
    for (int c = 0; c < COLS; ++c) imatrix[c] = 0.05f + fabsf(normal(&state));
    write_file(dir, "input.f32", x, sizeof x);
    write_file(dir, "imatrix.f32", imatrix, sizeof imatrix);

    static const enum ggml_type types[] = {GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,  GGML_TYPE_Q4_1,
                                           GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,  GGML_TYPE_Q4_K,
                                           GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_MXFP4};
    const size_t ntypes = sizeof types / sizeof types[0];
    char cases[8192];
    size_t at = (size_t)snprintf(cases, sizeof cases, "{\n \"rows\": %d,\n \"cols\": %d,\n \"types\": [", ROWS, COLS);
    for (size_t t = 0; t < ntypes; ++t) {
        const enum ggml_type type = types[t];
        const size_t bytes = (size_t)ROWS * ggml_row_size(type, COLS);
        uint8_t *q = calloc(1, bytes), *qi = calloc(1, bytes);
        ggml_quantize_chunk(type, x, q, 0, ROWS, COLS, NULL);
        ggml_quantize_chunk(type, x, qi, 0, ROWS, COLS, imatrix);
        ggml_get_type_traits(type)->to_float(q, back, ROWS * COLS);
        char name[64];
        snprintf(name, sizeof name, "%s.q", ggml_type_name(type));
        write_file(dir, name, q, bytes);
        snprintf(name, sizeof name, "%s.imatrix.q", ggml_type_name(type));
        write_file(dir, name, qi, bytes);
        snprintf(name, sizeof name, "%s.f32", ggml_type_name(type));
        write_file(dir, name, back, sizeof back);
        at += (size_t)snprintf(cases + at, sizeof cases - at, "%s\n  {\"type\": \"%s\", \"id\": %d, \"block\": %lld, \"block_bytes\": %zu}",
                               t ? "," : "", ggml_type_name(type), (int)type, (long long)ggml_blck_size(type), ggml_type_size(type));
        free(q);
        free(qi);
    }
    at += (size_t)snprintf(cases + at, sizeof cases - at, "\n ]\n}\n");
    write_file(dir, "cases.json", cases, at);
    return 0;
}
