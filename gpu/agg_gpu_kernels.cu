/*
 * Reduction kernels for device buffers: inout[i] = inout[i] OP in[i], with
 * the bits agg_reduce_fn (common/agg_reduce.c, agg_reduce_half.c) gives on
 * the host, for every dtype and op it supports. One source for nvcc and hipcc.
 *
 * The work is memory-bound (two reads and a write per element), so the
 * shape is what a copy kernel looks like: 16-byte loads and stores over a
 * grid-stride loop, two vectors in flight per thread, one wave of blocks
 * sized from the occupancy of each kernel. Elements before the first
 * 16-byte boundary and after the last go one by one in the same launch.
 * When inout and in sit at different offsets modulo 16 every element goes
 * one by one: correct, just slower.
 *
 * Where the host result depends on x86 behaviour rather than on IEEE 754,
 * the kernels copy x86: a sum or product that is NaN is the first NaN
 * operand (inout's, then in's) with its quiet bit set, or the x86 default
 * NaN (sign set) when neither operand was NaN (Inf - Inf, 0 * Inf). GPUs
 * return a canonical NaN instead, so without that step a node on the GPU
 * and one on the CPU would give different bits for the same data.
 */
#include "agg_gpu_compat.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* reduce.h is C; C++ spells restrict __restrict__. */
#define restrict __restrict__
#include "agg/reduce.h"
#undef restrict


namespace {

const int kThreads = 256; /* per block */
const int kMaxBlocksPerSm = 8;

thread_local char agg__why[256];

__attribute__((format(printf, 1, 2))) int agg__fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(agg__why, sizeof(agg__why), fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- x86 NaN rules ---------------------------------------------------- */

__device__ __forceinline__ float agg__nan_x86(float a, float b)
{
    uint32_t x = __float_as_uint(a), y = __float_as_uint(b);

    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return __uint_as_float(x | 0x00400000u);
    }
    if ((y & 0x7fffffffu) > 0x7f800000u) {
        return __uint_as_float(y | 0x00400000u);
    }
    return __uint_as_float(0xffc00000u);
}

__device__ __forceinline__ double agg__nan_x86(double a, double b)
{
    const uint64_t abs = 0x7fffffffffffffffull, inf = 0x7ff0000000000000ull;
    const uint64_t quiet = 0x0008000000000000ull;
    uint64_t       x = (uint64_t)__double_as_longlong(a), y = (uint64_t)__double_as_longlong(b);

    if ((x & abs) > inf) {
        return __longlong_as_double((long long)(x | quiet));
    }
    if ((y & abs) > inf) {
        return __longlong_as_double((long long)(y | quiet));
    }
    return __longlong_as_double((long long)0xfff8000000000000ull);
}

/* ---- element operations: F::f(a, b), a from inout, b from in --------- */

/* Floats (float and double; also the widened 16-bit ones). */
struct FSum {
    template <class F> __device__ static F f(F a, F b)
    {
        F r = a + b;
        return r != r ? agg__nan_x86(a, b) : r;
    }
};
struct FProd {
    template <class F> __device__ static F f(F a, F b)
    {
        F r = a * b;
        return r != r ? agg__nan_x86(a, b) : r;
    }
};
/* As AGG__FMIN/AGG__FMAX: a when it wins or is NaN, else b (NaN if b is). */
struct FMin {
    template <class F> __device__ static F f(F a, F b) { return (a < b || a != a) ? a : b; }
};
struct FMax {
    template <class F> __device__ static F f(F a, F b) { return (a > b || a != a) ? a : b; }
};

/*
 * Integers. Sum, product, the bitwise and the logical ops are run on the
 * unsigned type of the width (defined wrap-around, and one kernel serves
 * both signednesses); "1u *" keeps 8- and 16-bit products out of int.
 * Min/max run on the real type.
 */
#define AGG__IOP(_name, _expr)                                                \
    struct _name {                                                            \
        template <class T> __device__ static T f(T a, T b) { return (T)(_expr); } \
    };
AGG__IOP(ISum, a + b)
AGG__IOP(IProd, 1u * a * b)
AGG__IOP(IMin, b < a ? b : a)
AGG__IOP(IMax, b > a ? b : a)
AGG__IOP(ILand, (a != 0) & (b != 0))
AGG__IOP(ILor, (a != 0) | (b != 0))
AGG__IOP(ILxor, (a != 0) ^ (b != 0))
AGG__IOP(IBand, a & b)
AGG__IOP(IBor, a | b)
AGG__IOP(IBxor, a ^ b)

/* ---- float16 / bfloat16 conversions ----------------------------------- */

/* agg__half_to_float of agg_reduce_half.c, bit for bit. */
__device__ __forceinline__ float agg__h2f(uint32_t h)
{
    uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;

    if (exp == 0x1f) {
        return __uint_as_float(sign | 0x7f800000u | (man << 13));
    }
    if (exp == 0) {
        float f = (float)man * __uint_as_float(0x33800000u); /* 2^-24: exact */
        return sign ? -f : f;
    }
    return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}

/* agg__float_to_half, bit for bit (NaN keeps its top payload bits, quiet). */
__device__ __forceinline__ uint16_t agg__f2h(float f)
{
    uint32_t x = __float_as_uint(f), ax = x & 0x7fffffffu;
    uint32_t sign = (x >> 16) & 0x8000u;

    if (ax >= 0x7f800000u) {
        /* Inf, or NaN keeping its top payload bits with the quiet bit forced. */
        return (uint16_t)(ax == 0x7f800000u ? sign | 0x7c00u
                                            : sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) {
        return (uint16_t)(sign | 0x7c00u);
    }
    if (ax >= 0x38800000u) {
        uint32_t m = ax - (112u << 23);
        m += 0x0fffu + ((m >> 13) & 1u);
        return (uint16_t)(sign | (m >> 13));
    }
    if (ax <= 0x33000000u) {
        return (uint16_t)sign;
    }
    uint32_t shift = 126u - (ax >> 23);
    uint32_t man   = (ax & 0x7fffffu) | 0x800000u;
    uint32_t r = man >> shift, rem = man & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (r & 1u))) {
        r++;
    }
    return (uint16_t)(sign | r);
}

/* agg__float_to_bf16, bit for bit. */
__device__ __forceinline__ uint16_t agg__f2bf(float f)
{
    uint32_t x = __float_as_uint(f);

    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x0040u);
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/*
 * float16: the hardware conversions are exact for every number (including
 * half subnormals, overflow to Inf and round to nearest even), which is
 * what keeps this kernel at copy speed; only NaN differs (canonical NaN on
 * NVIDIA). So when the result is NaN, the element is done again with the
 * bit-exact conversions above; NaN is rare, and the branch is uniform in a
 * warp that has none.
 */
template <class F> struct OpF16 {
    typedef uint16_t type;
    enum { whole = 1 };
    __device__ static uint16_t apply(uint16_t a, uint16_t b)
    {
        float r = F::f(__half2float(__ushort_as_half(a)), __half2float(__ushort_as_half(b)));
        if (r != r) {
            return agg__f2h(F::f(agg__h2f(a), agg__h2f(b)));
        }
        return __half_as_ushort(__float2half_rn(r));
    }
};

/* bfloat16: widening is a shift, and narrowing a few integer operations. */
template <class F> struct OpBf16 {
    typedef uint16_t type;
    enum { whole = 1 };
    __device__ static uint16_t apply(uint16_t a, uint16_t b)
    {
        return agg__f2bf(F::f(__uint_as_float((uint32_t)a << 16),
                              __uint_as_float((uint32_t)b << 16)));
    }
};

/* Every other plain dtype: T itself. */
template <class T, class F> struct OpPlain {
    typedef T type;
    enum { whole = 1 };
    __device__ static T apply(T a, T b) { return F::f(a, b); }
};

/* ---- MINLOC / MAXLOC -------------------------------------------------- */

/* x beats y; for floats a NaN beats every number (and ties another NaN). */
#define AGG__BEATS(_name, _expr)                                              \
    struct _name {                                                            \
        template <class V> __device__ static bool f(V x, V y) { return _expr; } \
    };
AGG__BEATS(LocLt, x < y)
AGG__BEATS(LocGt, x > y)
AGG__BEATS(LocFLt, x < y || (x != x && y == y))
AGG__BEATS(LocFGt, x > y || (x != x && y == y))

/*
 * whole = 0 for the pairs with padding (int16_int32, float64_int32,
 * int64_int32): the two fields are stored one by one, never the padding.
 */
template <class P, class Beats, int kWhole> struct OpLoc {
    typedef P type;
    enum { whole = kWhole };
    __device__ static P apply(P a, P b)
    {
        const bool b_wins = Beats::f(b.value, a.value);
        const bool tie    = !b_wins && !Beats::f(a.value, b.value);
        P          r      = a;
        r.value = b_wins ? b.value : a.value;
        r.index = (b_wins || (tie && b.index < a.index)) ? b.index : a.index;
        return r;
    }
    __device__ static void put(P *p, const P &v)
    {
        p->value = v.value;
        p->index = v.index;
    }
};

/* ---- the kernel -------------------------------------------------------- */

template <class T> struct alignas(16) Vec {
    enum { n = 16 / sizeof(T) };
    T e[n];
};

template <class Op, bool kWhole = Op::whole> struct Put {
    typedef typename Op::type T;
    __device__ static void one(T *p, const T &v) { *p = v; }
    __device__ static void vec(Vec<T> *p, const Vec<T> &v)
    {
        uint4 raw;
        memcpy(&raw, &v, sizeof(raw));
        *reinterpret_cast<uint4 *>(p) = raw;
    }
};

template <class Op> struct Put<Op, false> {
    typedef typename Op::type T;
    __device__ static void one(T *p, const T &v) { Op::put(p, v); }
    __device__ static void vec(Vec<T> *p, const Vec<T> &v)
    {
        for (int k = 0; k < Vec<T>::n; k++) {
            Op::put(&p->e[k], v.e[k]);
        }
    }
};

template <class T> __device__ __forceinline__ Vec<T> agg__load(const Vec<T> *p)
{
    uint4  raw = *reinterpret_cast<const uint4 *>(p);
    Vec<T> v;
    memcpy(&v, &raw, sizeof(v));
    return v;
}

template <class Op>
__device__ __forceinline__ void agg__vec_step(Vec<typename Op::type> *o,
                                              const Vec<typename Op::type> *i)
{
    typedef typename Op::type T;
    Vec<T>       a = agg__load(o);
    const Vec<T> b = agg__load(i);

#pragma unroll
    for (int k = 0; k < Vec<T>::n; k++) {
        a.e[k] = Op::apply(a.e[k], b.e[k]);
    }
    Put<Op>::vec(o, a);
}

/*
 * Elements [0, head) and [head + nvec * n, count) one by one; the nvec
 * 16-byte vectors between them (inout + head and in + head are 16-byte
 * aligned) two per thread per trip, each load issued before any use.
 */
template <class Op>
__global__ void __launch_bounds__(kThreads)
agg__reduce_kernel(typename Op::type *__restrict__ inout, const typename Op::type *__restrict__ in,
                   size_t head, size_t nvec, size_t count)
{
    typedef typename Op::type T;
    typedef Vec<T>            V;
    const size_t nthr = (size_t)gridDim.x * blockDim.x;
    const size_t tid  = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    V *__restrict__       vo = reinterpret_cast<V *>(inout + head);
    const V *__restrict__ vi = reinterpret_cast<const V *>(in + head);
    size_t i = tid;

    for (; i + nthr < nvec; i += 2 * nthr) {
        V       a0 = agg__load(vo + i), a1 = agg__load(vo + i + nthr);
        const V b0 = agg__load(vi + i), b1 = agg__load(vi + i + nthr);
#pragma unroll
        for (int k = 0; k < V::n; k++) {
            a0.e[k] = Op::apply(a0.e[k], b0.e[k]);
            a1.e[k] = Op::apply(a1.e[k], b1.e[k]);
        }
        Put<Op>::vec(vo + i, a0);
        Put<Op>::vec(vo + i + nthr, a1);
    }
    if (i < nvec) {
        agg__vec_step<Op>(vo + i, vi + i);
    }

    const size_t tail = head + nvec * V::n;
    for (size_t j = tid; j < head + (count - tail); j += nthr) {
        const size_t k = j < head ? j : tail + (j - head);
        Put<Op>::one(inout + k, Op::apply(inout[k], in[k]));
    }
}

/* ---- launch ------------------------------------------------------------ */

typedef int (*agg__launch_fn)(void *inout, const void *in, size_t count, gpuStream_t stream);

int agg__sm_count(int dev)
{
    static int cache[AGG_GPU_MAX_DEV]; /* 0: not asked yet; racing threads write the same */
    const bool cached = dev >= 0 && dev < AGG_GPU_MAX_DEV;
    int        n      = cached ? __atomic_load_n(&cache[dev], __ATOMIC_RELAXED) : 0;
    gpuError_t e;

    if (n > 0) {
        return n;
    }
    e = gpuDeviceGetAttribute(&n, gpuDevAttrMultiProcessorCount, dev);
    if (e != gpuSuccess || n <= 0) {
        return agg__fail("%s failed: %s", AGG_GPU_STR(gpuDeviceGetAttribute), gpuGetErrorString(e));
    }
    if (cached) {
        __atomic_store_n(&cache[dev], n, __ATOMIC_RELAXED);
    }
    return n;
}

template <class Op>
int agg__launch(void *inout_v, const void *in_v, size_t count, gpuStream_t stream)
{
    typedef typename Op::type T;
    static int      occ_cache[AGG_GPU_MAX_DEV]; /* blocks per SM, per device */
    const uintptr_t o = (uintptr_t)inout_v, n = (uintptr_t)in_v;
    const size_t    vn = Vec<T>::n;
    size_t          head, nvec;
    int             dev, sms, occ = 0;
    gpuError_t      e;

    if (count == 0) {
        return 0;
    }
    if (o % alignof(T) != 0 || n % alignof(T) != 0) {
        return agg__fail("%s reduce: a buffer is not aligned to its element size (%zu bytes)",
                         AGG_GPU_RT_HUMAN, alignof(T));
    }
    if ((o & 15) == (n & 15) && (o & 15) % sizeof(T) == 0) {
        head = (16 - (o & 15)) % 16 / sizeof(T);
        head = head < count ? head : count;
        nvec = (count - head) / vn;
    } else {
        head = count;
        nvec = 0;
    }

    e = gpuGetDevice(&dev);
    if (e != gpuSuccess) {
        return agg__fail("%s failed: %s", AGG_GPU_STR(gpuGetDevice), gpuGetErrorString(e));
    }
    sms = agg__sm_count(dev);
    if (sms < 0) {
        return -1;
    }
    if (dev >= 0 && dev < AGG_GPU_MAX_DEV) {
        occ = __atomic_load_n(&occ_cache[dev], __ATOMIC_RELAXED);
    }
    if (occ <= 0) {
        e = gpuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, agg__reduce_kernel<Op>, kThreads, 0);
        if (e != gpuSuccess) {
            return agg__fail("%s failed: %s",
                             AGG_GPU_STR(gpuOccupancyMaxActiveBlocksPerMultiprocessor),
                             gpuGetErrorString(e));
        }
        occ = occ < 1 ? 1 : occ > kMaxBlocksPerSm ? kMaxBlocksPerSm : occ;
        if (dev >= 0 && dev < AGG_GPU_MAX_DEV) {
            __atomic_store_n(&occ_cache[dev], occ, __ATOMIC_RELAXED);
        }
    }

    /* One wave at most; fewer blocks when there is less work than that. */
    const size_t scalar = count - nvec * vn;
    const size_t items  = (nvec + 1) / 2 > scalar ? (nvec + 1) / 2 : scalar;
    const size_t want   = (items + kThreads - 1) / kThreads;
    const size_t wave   = (size_t)sms * (size_t)occ;
    const unsigned blocks = (unsigned)(want < wave ? want : wave);

    agg__reduce_kernel<Op><<<blocks, kThreads, 0, stream>>>((T *)inout_v, (const T *)in_v, head,
                                                             nvec, count);
    e = gpuGetLastError();
    if (e != gpuSuccess) {
        return agg__fail("%s reduce kernel launch failed: %s", AGG_GPU_RT_HUMAN,
                         gpuGetErrorString(e));
    }
    return 0;
}

/* ---- dispatch: one row per dtype, NULL where agg_reduce_fn is NULL ----- */

template <class ST, class UT> agg__launch_fn agg__pick_int(int op)
{
    switch (op) {
    case AGG_OP_SUM:  return agg__launch<OpPlain<UT, ISum> >;
    case AGG_OP_PROD: return agg__launch<OpPlain<UT, IProd> >;
    case AGG_OP_MIN:  return agg__launch<OpPlain<ST, IMin> >;
    case AGG_OP_MAX:  return agg__launch<OpPlain<ST, IMax> >;
    case AGG_OP_LAND: return agg__launch<OpPlain<UT, ILand> >;
    case AGG_OP_BAND: return agg__launch<OpPlain<UT, IBand> >;
    case AGG_OP_LOR:  return agg__launch<OpPlain<UT, ILor> >;
    case AGG_OP_BOR:  return agg__launch<OpPlain<UT, IBor> >;
    case AGG_OP_LXOR: return agg__launch<OpPlain<UT, ILxor> >;
    case AGG_OP_BXOR: return agg__launch<OpPlain<UT, IBxor> >;
    default:          return NULL;
    }
}

/* W<F> is the element op for float op F: OpPlain<float, F>, OpF16<F>, ... */
template <template <class> class W> agg__launch_fn agg__pick_float(int op)
{
    switch (op) {
    case AGG_OP_SUM:  return agg__launch<W<FSum> >;
    case AGG_OP_PROD: return agg__launch<W<FProd> >;
    case AGG_OP_MIN:  return agg__launch<W<FMin> >;
    case AGG_OP_MAX:  return agg__launch<W<FMax> >;
    default:          return NULL;
    }
}

template <class F> using OpF32 = OpPlain<float, F>;
template <class F> using OpF64 = OpPlain<double, F>;

/* A pair is stored whole only when it has no padding. */
template <class P> constexpr int agg__no_pad()
{
    return sizeof(P) == sizeof(P::value) + sizeof(int32_t);
}

template <class P, class Lt, class Gt, int kWhole = agg__no_pad<P>()>
agg__launch_fn agg__pick_loc(int op)
{
    switch (op) {
    case AGG_OP_MINLOC: return agg__launch<OpLoc<P, Lt, kWhole> >;
    case AGG_OP_MAXLOC: return agg__launch<OpLoc<P, Gt, kWhole> >;
    default:            return NULL;
    }
}

agg__launch_fn agg__pick(int dtype, int op)
{
    switch (dtype) {
    case AGG_DTYPE_INT8:     return agg__pick_int<int8_t, uint8_t>(op);
    case AGG_DTYPE_UINT8:    return agg__pick_int<uint8_t, uint8_t>(op);
    case AGG_DTYPE_INT16:    return agg__pick_int<int16_t, uint16_t>(op);
    case AGG_DTYPE_UINT16:   return agg__pick_int<uint16_t, uint16_t>(op);
    case AGG_DTYPE_INT32:    return agg__pick_int<int32_t, uint32_t>(op);
    case AGG_DTYPE_UINT32:   return agg__pick_int<uint32_t, uint32_t>(op);
    case AGG_DTYPE_INT64:    return agg__pick_int<int64_t, uint64_t>(op);
    case AGG_DTYPE_UINT64:   return agg__pick_int<uint64_t, uint64_t>(op);
    case AGG_DTYPE_FLOAT16:  return agg__pick_float<OpF16>(op);
    case AGG_DTYPE_BFLOAT16: return agg__pick_float<OpBf16>(op);
    case AGG_DTYPE_FLOAT32:  return agg__pick_float<OpF32>(op);
    case AGG_DTYPE_FLOAT64:  return agg__pick_float<OpF64>(op);
    case AGG_DTYPE_FLOAT32_INT32: return agg__pick_loc<agg_float32_int32_t, LocFLt, LocFGt>(op);
    case AGG_DTYPE_FLOAT64_INT32: return agg__pick_loc<agg_float64_int32_t, LocFLt, LocFGt>(op);
    case AGG_DTYPE_INT64_INT32:   return agg__pick_loc<agg_int64_int32_t, LocLt, LocGt>(op);
    case AGG_DTYPE_INT32_INT32:   return agg__pick_loc<agg_int32_int32_t, LocLt, LocGt>(op);
    case AGG_DTYPE_INT16_INT32:   return agg__pick_loc<agg_int16_int32_t, LocLt, LocGt>(op);
    default:
        return NULL;
    }
}

static_assert(AGG_DTYPE__COUNT == 17 && AGG_OP__COUNT == 12,
              "a dtype or op was added to reduce.h: give it a row in agg__pick");
static_assert(sizeof(agg_float64_int32_t) == 16 && sizeof(agg_int16_int32_t) == 8,
              "pair layouts as in reduce.h");

} /* namespace */

extern "C" int agg_gpu_kernel_supported(int dtype, int op)
{
    return agg__pick(dtype, op) != NULL;
}

extern "C" int agg_gpu_kernel_reduce(void *inout, const void *in, size_t count, int dtype, int op,
                                     void *stream)
{
    agg__launch_fn fn = agg__pick(dtype, op);

    if (fn == NULL) {
        return agg__fail("%s reduce: dtype %d with op %d is not supported (as in agg_reduce_fn)",
                         AGG_GPU_RT_HUMAN, dtype, op);
    }
    return fn(inout, in, count, (gpuStream_t)stream);
}

extern "C" const char *agg_gpu_kernel_why(void)
{
    return agg__why;
}
