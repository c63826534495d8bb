// out[at_n] += scale_n * src[take_n] for n < N, in one pass: the CPU kernel
// behind core/row_scatter.py (built and loaded by core/native_rows.py).
//
// XLA:CPU runs this op as a gather written to memory and a scatter-add that
// reads it back, element by element. Here each entry reads its source row
// once and adds it into its output row; the rows of the entry PREFETCH
// entries ahead are asked for meanwhile (source rows are random reads: an
// embedding table's rows by feature id, or the images' gradients by row).
//
// An entry whose output row or source row is out of range adds nothing (the
// callers' indices never are: padding names row 0 with scale 0).
//
// `threads` > 1 (the caller's promise that `at` is sorted) cuts the entries
// into that many runs at boundaries between output rows, one thread a run:
// no two threads add into the same row.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t PREFETCH = 8;        // entries ahead
constexpr int64_t FLOATS_A_LINE = 16;  // 64-byte cache lines

inline void prefetch_row(const float* row, int64_t D) {
  for (int64_t d = 0; d < D; d += FLOATS_A_LINE) __builtin_prefetch(row + d);
}

void AddRange(float* __restrict__ o, int64_t M, int64_t D, const int32_t* a, const int32_t* t,
              const float* s, const float* __restrict__ x, int64_t S, int64_t begin,
              int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    if (n + PREFETCH < end && t[n + PREFETCH] >= 0 && t[n + PREFETCH] < S) {
      prefetch_row(x + t[n + PREFETCH] * D, D);
    }
    const int64_t i = a[n], j = t[n];
    const float c = s[n];
    if (c == 0.f || i < 0 || i >= M || j < 0 || j >= S) continue;
    float* __restrict__ row = o + i * D;
    const float* __restrict__ from = x + j * D;
    for (int64_t d = 0; d < D; ++d) row[d] += c * from[d];
  }
}

ffi::Error AddScaledRows(ffi::Buffer<ffi::F32> out_in, ffi::Buffer<ffi::S32> at,
                         ffi::Buffer<ffi::F32> scale, ffi::Buffer<ffi::F32> src,
                         ffi::Buffer<ffi::S32> take, ffi::ResultBuffer<ffi::F32> out,
                         int64_t threads) {
  const int64_t M = out_in.dimensions()[0], D = out_in.dimensions()[1];
  const int64_t S = src.dimensions()[0], N = at.element_count();
  if (src.dimensions()[1] != D || scale.element_count() != N || take.element_count() != N) {
    return ffi::Error::InvalidArgument("add_scaled_rows: shapes disagree");
  }
  float* __restrict__ o = out->typed_data();
  if (o != out_in.typed_data()) std::memcpy(o, out_in.typed_data(), sizeof(float) * M * D);
  const int32_t* a = at.typed_data();
  const int32_t* t = take.typed_data();
  const float* s = scale.typed_data();
  const float* x = src.typed_data();
  if (threads <= 1 || N < 2 * threads) {
    AddRange(o, M, D, a, t, s, x, S, 0, N);
    return ffi::Error::Success();
  }
  std::vector<int64_t> cut{0};  // each run starts where a new output row does
  for (int64_t k = 1; k < threads; ++k) {
    int64_t n = std::max(cut.back(), N * k / threads);
    while (n > 0 && n < N && a[n] == a[n - 1]) ++n;
    cut.push_back(n);
  }
  cut.push_back(N);
  std::vector<std::thread> helpers;
  for (int64_t k = 1; k < threads; ++k) {
    helpers.emplace_back(AddRange, o, M, D, a, t, s, x, S, cut[k], cut[k + 1]);
  }
  AddRange(o, M, D, a, t, s, x, S, cut[0], cut[1]);
  for (auto& h : helpers) h.join();
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(WsabieAddScaledRows, AddScaledRows,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()   // out_in: M×D
                                  .Arg<ffi::Buffer<ffi::S32>>()   // at: N
                                  .Arg<ffi::Buffer<ffi::F32>>()   // scale: N
                                  .Arg<ffi::Buffer<ffi::F32>>()   // src: S×D
                                  .Arg<ffi::Buffer<ffi::S32>>()   // take: N
                                  .Ret<ffi::Buffer<ffi::F32>>()    // out: M×D (aliases out_in)
                                  .Attr<int64_t>("threads"));      // 1, or more where at is sorted
