/* Reads a GGUF file with ggml's own reader (gguf_init_from_file, loading the data too) and
 * prints its alignment, every key with its type and value, and every tensor with its type, ne,
 * offset, size and the byte its data is filled with (-1 when the bytes differ), in the form
 * write_sample prints. usage: read_with_ggml FILE.gguf */
#include "ggml.h"
#include "gguf.h"

#include <stdio.h>
#include <string.h>

static const char *type_name(enum gguf_type t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < 13 ? names[t] : "unknown";
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    struct ggml_context *data = NULL;
    struct gguf_init_params params = {.no_alloc = false, .ctx = &data};
    struct gguf_context *ctx = gguf_init_from_file(argv[1], params);
    if (!ctx) {
        printf("ggml refused the file\n");
        return 1;
    }
    printf("alignment %zu\n", gguf_get_alignment(ctx));
    for (int64_t k = 0; k < gguf_get_n_kv(ctx); ++k) {
        const enum gguf_type t = gguf_get_kv_type(ctx, k);
        const char *key = gguf_get_key(ctx, k);
        if (t == GGUF_TYPE_ARRAY) {
            const enum gguf_type e = gguf_get_arr_type(ctx, k);
            const size_t n = gguf_get_arr_n(ctx, k);
            printf("kv %s %s[%zu]", key, type_name(e), n);
            for (size_t i = 0; i < n; ++i) {
                if (e == GGUF_TYPE_STRING) printf(" \"%s\"", gguf_get_arr_str(ctx, k, i));
                else if (e == GGUF_TYPE_FLOAT32) printf(" %.9g", ((const float *)gguf_get_arr_data(ctx, k))[i]);
                else if (e == GGUF_TYPE_INT32) printf(" %d", ((const int32_t *)gguf_get_arr_data(ctx, k))[i]);
            }
            printf("\n");
            continue;
        }
        printf("kv %s %s", key, type_name(t));
        switch (t) {
        case GGUF_TYPE_STRING: printf(" \"%s\"", gguf_get_val_str(ctx, k)); break;
        case GGUF_TYPE_FLOAT32: printf(" %.9g", gguf_get_val_f32(ctx, k)); break;
        case GGUF_TYPE_BOOL: printf(" %d", gguf_get_val_bool(ctx, k) ? 1 : 0); break;
        case GGUF_TYPE_UINT16: printf(" %u", gguf_get_val_u16(ctx, k)); break;
        case GGUF_TYPE_UINT32: printf(" %u", gguf_get_val_u32(ctx, k)); break;
        case GGUF_TYPE_UINT64: printf(" %llu", (unsigned long long)gguf_get_val_u64(ctx, k)); break;
        case GGUF_TYPE_INT32: printf(" %d", gguf_get_val_i32(ctx, k)); break;
        default: printf(" ?"); break;
        }
        printf("\n");
    }
    for (int64_t i = 0; i < gguf_get_n_tensors(ctx); ++i) {
        const char *name = gguf_get_tensor_name(ctx, i);
        const struct ggml_tensor *t = ggml_get_tensor(data, name);
        const unsigned char *bytes = t->data;
        int fill = bytes[0];
        for (size_t b = 0; b < ggml_nbytes(t); ++b)
            if (bytes[b] != bytes[0]) fill = -1;
        printf("tensor %s type %d ne %lld %lld %lld %lld offset %zu bytes %zu fill %d\n", name, (int)gguf_get_tensor_type(ctx, i),
               (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], gguf_get_tensor_offset(ctx, i),
               ggml_nbytes(t), fill);
    }
    gguf_free(ctx);
    ggml_free(data);
    return 0;
}
