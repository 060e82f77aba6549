#include "train/ops/skinny_gemm.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>

// Only these functions use AVX2 and FMA: the rest of the binary runs on any x86-64, and
// runs_here() keeps them from being called where the CPU lacks either.
#define PARBENCH_AVX2_FMA __attribute__((target("avx2,fma")))

namespace parbench::skinny_gemm {

// A baseline build (train/ops/cpu_simd.hpp) holds no AVX instruction: none of this is compiled,
// runs_here() says so and CpuOps never calls the functions.
#if !defined(PARBENCH_CPU_BASELINE_BUILD)
namespace {

constexpr int tile_rows = 6;
constexpr int tile_columns = 16;
// Up to this batch the forward product beats OpenBLAS (0.3.21) on an AMD EPYC (Zen 3) at
// C = OC = 1024: 16 rows 90 against 50 GFLOP/s, 64 rows 89 against 75, 128 rows 88 against 84;
// at 256 rows both reach 90.
constexpr int largest_batch_rows = 128;

std::size_t index(int value) { return static_cast<std::size_t>(value); }

// acc (Rows x 16) = Σ_p a[r * a_ld + p] · b[p * 16 + 0..15], p = 0 .. depth-1 in order. The
// loops over r are unrolled on request: left rolled, GCC keeps the accumulators in memory
// through the whole product (measured: 28 against 90 GFLOP/s).
template <int Rows>
PARBENCH_AVX2_FMA __attribute__((always_inline)) inline void multiply_tile(const float* a, std::size_t a_ld,
                                                                           const float* b, std::size_t depth,
                                                                           __m256 (&acc)[Rows][2]) {
#pragma GCC unroll 6
    for (int r = 0; r < Rows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (std::size_t p = 0; p < depth; ++p) {
        const __m256 low = _mm256_loadu_ps(b + p * tile_columns);
        const __m256 high = _mm256_loadu_ps(b + p * tile_columns + 8);
#pragma GCC unroll 6
        for (int r = 0; r < Rows; ++r) {
            const __m256 ar = _mm256_broadcast_ss(a + index(r) * a_ld + p);
            acc[r][0] = _mm256_fmadd_ps(ar, low, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(ar, high, acc[r][1]);
        }
    }
}

// c[r * ldc + 0..15] = acc[r], + c with Accumulate (a template argument for the reason above).
template <int Rows, bool Accumulate>
PARBENCH_AVX2_FMA __attribute__((always_inline)) inline void store_tile(float* c, std::size_t ldc,
                                                                        const __m256 (&acc)[Rows][2]) {
#pragma GCC unroll 6
    for (int r = 0; r < Rows; ++r) {
        float* row = c + index(r) * ldc;
        __m256 low = acc[r][0], high = acc[r][1];
        if constexpr (Accumulate) {
            low = _mm256_add_ps(_mm256_loadu_ps(row), low);
            high = _mm256_add_ps(_mm256_loadu_ps(row + 8), high);
        }
        _mm256_storeu_ps(row, low);
        _mm256_storeu_ps(row + 8, high);
    }
}

// c[r * ldc + 0 .. columns-1] (+)= Σ_p a[r * a_ld + p] · strip[p * 16 + 0 .. columns-1]: one tile
// of the backward products, whose strips are 16 columns wide but the last may hold fewer
// (zeros beyond). Not inlined: each call is a product of depth 64 or more.
template <int Rows, bool Accumulate, bool WholeStrip>
PARBENCH_AVX2_FMA void product_tile(const float* a, std::size_t a_ld, const float* strip, std::size_t depth, float* c,
                                    std::size_t ldc, int columns) {
    __m256 acc[Rows][2];
    multiply_tile<Rows>(a, a_ld, strip, depth, acc);
    if constexpr (WholeStrip) {
        store_tile<Rows, Accumulate>(c, ldc, acc);
    } else {
        float tile[Rows][tile_columns];
        store_tile<Rows, false>(&tile[0][0], tile_columns, acc);
        for (int r = 0; r < Rows; ++r)
            for (int j = 0; j < columns; ++j) {
                float& target = c[index(r) * ldc + index(j)];
                target = Accumulate ? target + tile[r][j] : tile[r][j];
            }
    }
}
template <int Rows>
void product_tile(bool accumulate, const float* a, std::size_t a_ld, const float* strip, std::size_t depth, float* c,
                  std::size_t ldc, int columns) {
    const bool whole = columns == tile_columns;
    if (accumulate)
        (whole ? product_tile<Rows, true, true> : product_tile<Rows, true, false>)(a, a_ld, strip, depth, c, ldc,
                                                                                  columns);
    else
        (whole ? product_tile<Rows, false, true> : product_tile<Rows, false, false>)(a, a_ld, strip, depth, c, ldc,
                                                                                    columns);
}

// Block<R>::run(args, first) over row blocks [first, first + R) covering [0, rows): whole
// tiles, then one remainder.
template <template <int> class Block, typename Args>
void over_row_blocks(const Args& args, int rows) {
    int first = 0;
    for (; first + tile_rows <= rows; first += tile_rows) Block<tile_rows>::run(args, first);
    switch (rows - first) {
        case 5: Block<5>::run(args, first); break;
        case 4: Block<4>::run(args, first); break;
        case 3: Block<3>::run(args, first); break;
        case 2: Block<2>::run(args, first); break;
        case 1: Block<1>::run(args, first); break;
        default: break;
    }
}

// `rows` rows of C columns as ⌈C/16⌉ strips of [rows][16], each contiguous, the last padded
// with zeros: strips[s * pitch + r * 16 + j] = source[r * ld + s * 16 + j]. The pitch is one
// cache line more than a strip, so that strips a power of two apart do not share an L1 set.
int strip_count(int C) { return (C + tile_columns - 1) / tile_columns; }
std::size_t strip_pitch(int rows) { return index(rows + 1) * tile_columns; }
int strip_width(int C, int s) { return std::min(tile_columns, C - s * tile_columns); }
float* copy_into_strips(std::vector<float>& strips, const float* source, std::size_t ld, int rows, int C) {
    const std::size_t pitch = strip_pitch(rows);
    if (strips.size() < index(strip_count(C)) * pitch) strips.resize(index(strip_count(C)) * pitch);
    for (int r = 0; r < rows; ++r) {
        const float* row = source + index(r) * ld;
        float* target = strips.data() + index(r) * tile_columns;
        for (int s = 0; s < C / tile_columns; ++s)
            // A constant size: GCC copies it with two vector moves (std::copy's run-time size
            // became a memmove call per strip, 6 % of mlp-deep's step).
            std::memcpy(target + index(s) * pitch, row + index(s) * tile_columns, tile_columns * sizeof(float));
        if (const int last = C / tile_columns; last < strip_count(C)) {
            const int width = strip_width(C, last);
            std::copy(row + index(last) * tile_columns, row + index(C), target + index(last) * pitch);
            std::fill(target + index(last) * pitch + index(width), target + index(last) * pitch + tile_columns, 0.0f);
        }
    }
    return strips.data();
}

struct ForwardArgs {
    float* out;
    const float* panels;  // inpᵀ in panels of 16 batch rows, [C][16] each, zeros past N
    const float* weight;
    const float* bias;
    int N, C, OC;
};

// Output features [o, o + Rows) for every batch row, from the weight's rows read in place (24 KB
// at C = 1024, in L1 while each panel passes); the tile is outᵀ, stored transposed.
template <int Rows>
struct ForwardBlock {
    PARBENCH_AVX2_FMA static void run(const ForwardArgs& f, int o) {
        const std::size_t C = index(f.C);
        for (int first = 0; first < f.N; first += tile_columns) {
            __m256 acc[Rows][2];
            multiply_tile<Rows>(f.weight + index(o) * C, C, f.panels + index(first / tile_columns) * C * tile_columns,
                                C, acc);
            float tile[Rows][tile_columns];
            store_tile<Rows, false>(&tile[0][0], tile_columns, acc);
            const int columns = std::min(tile_columns, f.N - first);
            for (int i = 0; i < columns; ++i) {
                float* row = f.out + index(first + i) * index(f.OC) + index(o);
                for (int r = 0; r < Rows; ++r) row[r] = f.bias != nullptr ? f.bias[o + r] + tile[r][i] : tile[r][i];
            }
        }
    }
};

// dinp[i .. i + Rows) in one strip's columns (+)= dout's rows over the band · the band's strip.
struct InputGradientArgs {
    float* dinp;  // at the strip's first column
    bool accumulate;
    const float* dout;  // at the band's first column
    const float* strip;
    int C, OC, depth, columns;
};
template <int Rows>
struct InputGradientBlock {
    static void run(const InputGradientArgs& g, int i) {
        product_tile<Rows>(g.accumulate, g.dout + index(i) * index(g.OC), index(g.OC), g.strip, index(g.depth),
                           g.dinp + index(i) * index(g.C), index(g.C), g.columns);
    }
};

// dweight[o .. o + Rows) (+)= doutᵀ's rows · inp's strips, strip by strip (inp's copy, 256 KB at
// N = 64 and C = 1024, streams from L2 in order; the Rows rows of doutᵀ stay in L1).
struct WeightGradientArgs {
    float* dweight;
    bool accumulate;
    const float* dout_columns;  // [rows][N]
    const float* strips;
    int N, C;
};
template <int Rows>
struct WeightGradientBlock {
    static void run(const WeightGradientArgs& g, int o) {
        for (int s = 0; s < strip_count(g.C); ++s)
            product_tile<Rows>(g.accumulate, g.dout_columns + index(o) * index(g.N), index(g.N),
                               g.strips + index(s) * strip_pitch(g.N), index(g.N),
                               g.dweight + index(o) * index(g.C) + index(s) * tile_columns, index(g.C),
                               strip_width(g.C, s));
    }
};

}  // namespace

bool runs_here() {
    static const bool has_avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return has_avx2_fma;
}

bool suits(CpuKernels kernels, int batch_rows) {
    return kernels == CpuKernels::avx2 && runs_here() && batch_rows <= largest_batch_rows;
}

void forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC,
             Scratch& scratch) {
    const std::size_t panels = index((N + tile_columns - 1) / tile_columns);
    const std::size_t panel_floats = index(C) * tile_columns;
    std::vector<float>& transposed = scratch.input_panels;
    if (transposed.size() < panels * panel_floats) transposed.resize(panels * panel_floats);
    for (std::size_t q = 0; q < panels; ++q) {
        float* panel = transposed.data() + q * panel_floats;
        for (std::size_t j = 0; j < tile_columns; ++j) {
            const std::size_t i = q * tile_columns + j;
            for (std::size_t k = 0; k < index(C); ++k)
                panel[k * tile_columns + j] = i < index(N) ? inp[i * index(C) + k] : 0.0f;
        }
    }
    over_row_blocks<ForwardBlock>(ForwardArgs{out, transposed.data(), weight, bias, N, C, OC}, OC);
}

void input_gradient(float* dinp, float beta, const float* dout, const float* weight, int N, int C, int OC, int first,
                    int rows, Scratch& scratch) {
    for (int row = first; row < first + rows; row += input_gradient_band_rows) {
        const int depth = std::min(input_gradient_band_rows, first + rows - row);
        const float* strips = copy_into_strips(scratch.weight_strips, weight + index(row) * index(C), index(C), depth, C);
        const bool accumulate = row > first || beta != 0.0f;
        for (int s = 0; s < strip_count(C); ++s)
            over_row_blocks<InputGradientBlock>(
                InputGradientArgs{dinp + index(s) * tile_columns, accumulate, dout + index(row),
                                  strips + index(s) * strip_pitch(depth), C, OC, depth, strip_width(C, s)},
                N);
    }
}

void weight_gradient(float* dweight, float beta, const float* dout, const float* inp, int N, int C, int OC, int first,
                     int rows, Scratch& scratch) {
    std::vector<float>& columns = scratch.dout_columns;
    if (columns.size() < index(rows) * index(N)) columns.resize(index(rows) * index(N));
    for (int i = 0; i < N; ++i)
        for (int o = 0; o < rows; ++o) columns[index(o) * index(N) + index(i)] = dout[index(i) * index(OC) + index(first + o)];
    // A piece that continues the previous one finds inp's strips copied (mlp-deep: once per
    // layer, not once per piece).
    const Scratch::StripsOf continued{inp, N, C, first};
    if (first == 0 || scratch.input_strips_of != continued) copy_into_strips(scratch.input_strips, inp, index(C), N, C);
    scratch.input_strips_of = {inp, N, C, first + rows};
    const float* strips = scratch.input_strips.data();
    over_row_blocks<WeightGradientBlock>(WeightGradientArgs{dweight, beta != 0.0f, columns.data(), strips, N, C}, rows);
}

#else

bool runs_here() { return false; }
bool suits(CpuKernels, int) { return false; }

namespace {
[[noreturn]] void not_built() { throw std::logic_error("skinny_gemm: not in a baseline build (ask runs_here())"); }
}  // namespace

void forward(float*, const float*, const float*, const float*, int, int, int, Scratch&) { not_built(); }
void input_gradient(float*, float, const float*, const float*, int, int, int, int, int, Scratch&) { not_built(); }
void weight_gradient(float*, float, const float*, const float*, int, int, int, int, int, Scratch&) { not_built(); }

#endif

}  // namespace parbench::skinny_gemm
