//! PATCH (tint, not in burn-flex 0.21.0): a batched f32 `exp` for the softmax, the sigmoid and
//! `exp` itself, vectorised, returning what `f32::exp` returns on x86-64 glibc (2.28 and later,
//! CPUs with FMA) bit for bit.
//!
//! burn-flex 0.21.0 calls `f32::exp` one element at a time in these ops (its softmax says so:
//! "no SIMD exp in macerator"), a call into libm per element that no loop around it can vectorise.
//! glibc's `expf` (`sysdeps/ieee754/flt-32/e_expf.c`, from ARM's optimized-routines; on FMA
//! machines the `__expf_fma` build) is a table method in double precision: `x N / ln 2 = k + r`
//! (`N = 32`), `2^(k/N)` from a 32-entry table with the exponent added, `2^(r/N)` by a cubic, one
//! rounding to f32 at the end. The kernels below are that method with the same constants and the
//! same operations fused (`_mm*_fmadd_pd` / `_mm*_fmsub_pd` where the FMA build issues
//! `vfmadd` / `vfmsub`), so each step rounds as in glibc and the f32 result is the same bits.
//! Inputs outside `|x| < 88` (overflow, underflow, infinities, NaN), where glibc branches to
//! special cases, go to `f32::exp` itself.
//!
//! On x86-64 the kernel is chosen at run time ([`ExpKernel`]): 16 values at a time with AVX-512F
//! (the table read by two permutes and a blend), else 8 at a time with AVX2 and FMA (a gather),
//! else `f32::exp` per value, as on other CPUs and in builds without `std` (which cannot detect
//! the CPU's features); a vector kernel hands its last `len % 16` or `len % 8` values on to the
//! next. Evidence that the bits agree: `crates/tint-ops/tests/all/flex_exp.rs` in the tint
//! workspace (every 61st f32 bit pattern of `|x| < 88` and the edges, by each kernel the CPU has,
//! against `f32::exp`; an ignored test walks all of them).

/// `tab[i] = bits(2^(i/32)) - (i << 47)`: glibc's `__exp2f_data.tab` (the exponent of `2^(k/32)`
/// is added back as `k << 47`).
const TABLE: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];
/// `32 / ln 2` (`0x1.71547652b82fep+0 * 32`).
const INV_LN2_N: f64 = f64::from_bits(0x4047_1547_652b_82fe);
/// The cubic of `2^(r/32)`, highest power first (`__exp2f_data.poly_scaled`).
const C0: f64 = f64::from_bits(0x3ebc_6af8_4b91_2394);
const C1: f64 = f64::from_bits(0x3f2e_bfce_50fa_c4f3);
const C2: f64 = f64::from_bits(0x3f96_2e42_ff0c_52d6);
/// `0x1.8p+52`: adding it rounds to an integer, left in the low bits.
const SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
/// Values per chunk of the sigmoid (its inputs are kept on the stack while `exp` runs).
const CHUNK: usize = 64;

/// The implementations of [`exp_in_place`]; it takes the first one the CPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpKernel {
    /// 16 values at a time (x86-64 with AVX-512F).
    Avx512,
    /// 8 values at a time (x86-64 with AVX2 and FMA).
    Avx2,
    /// `f32::exp` per value (every CPU).
    Scalar,
}

impl ExpKernel {
    /// Every kernel, fastest first.
    pub const ALL: [ExpKernel; 3] = [ExpKernel::Avx512, ExpKernel::Avx2, ExpKernel::Scalar];

    /// Whether this CPU (and this build: feature detection needs `std`) can run the kernel.
    pub fn is_available(self) -> bool {
        match self {
            #[cfg(all(target_arch = "x86_64", feature = "std"))]
            ExpKernel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(all(target_arch = "x86_64", feature = "std"))]
            ExpKernel::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            ExpKernel::Scalar => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }
}

/// `exp` of every value, in place, equal to `f32::exp` element by element (see the module), by
/// the fastest [`ExpKernel`] the CPU has.
pub fn exp_in_place(values: &mut [f32]) {
    let kernel = ExpKernel::ALL
        .into_iter()
        .find(|k| k.is_available())
        .unwrap_or(ExpKernel::Scalar);
    exp_in_place_by(kernel, values);
}

/// [`exp_in_place`] by the given kernel; `false` (values untouched) when the CPU lacks it.
pub fn exp_in_place_by(kernel: ExpKernel, values: &mut [f32]) -> bool {
    if !kernel.is_available() {
        return false;
    }
    match kernel {
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        // SAFETY: the CPU has AVX-512F (`is_available`).
        ExpKernel::Avx512 => unsafe { x86::exp_in_place_avx512(values) },
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        // SAFETY: the CPU has AVX2 and FMA (`is_available`).
        ExpKernel::Avx2 => unsafe { x86::exp_in_place_avx2(values) },
        _ => {
            for x in values.iter_mut() {
                *x = x.exp();
            }
        }
    }
    true
}

/// The sigmoid of every value, in place, equal to burn-flex's scalar `sigmoid_f32`:
/// `1 / (1 + e^{-x})` for `x >= 0`, else `e^x / (1 + e^x)`.
pub fn sigmoid_in_place(values: &mut [f32]) {
    let mut inputs = [0.0f32; CHUNK];
    for chunk in values.chunks_mut(CHUNK) {
        inputs[..chunk.len()].copy_from_slice(chunk);
        for x in chunk.iter_mut() {
            *x = if *x >= 0.0 { -*x } else { *x };
        }
        exp_in_place(chunk);
        for (e, &x) in chunk.iter_mut().zip(&inputs) {
            *e = if x >= 0.0 {
                1.0 / (1.0 + *e)
            } else {
                *e / (1.0 + *e)
            };
        }
    }
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
mod x86 {
    use super::{C0, C1, C2, INV_LN2_N, SHIFT, TABLE};
    use core::arch::x86_64::*;

    /// glibc's `expf` table path on 4 values widened to f64, operation for operation as its FMA
    /// build (`e_expf.c`): `kd + SHIFT` and `r` fused, the table entry plus `ki << 47` as the
    /// scale, the cubic by three fused multiply-adds.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp_table_path(xd: __m256d) -> __m256d {
        let inv_ln2_n = _mm256_set1_pd(INV_LN2_N);
        let shift = _mm256_set1_pd(SHIFT);
        let shifted = _mm256_fmadd_pd(xd, inv_ln2_n, shift);
        let kd = _mm256_sub_pd(shifted, shift);
        let r = _mm256_fmsub_pd(inv_ln2_n, xd, kd);
        let ki = _mm256_castpd_si256(shifted);
        let index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
        // SAFETY: every index is `ki & 31`, inside the 32-entry table.
        let entry = unsafe { _mm256_i64gather_epi64::<8>(TABLE.as_ptr().cast(), index) };
        let scale = _mm256_castsi256_pd(_mm256_add_epi64(entry, _mm256_slli_epi64::<47>(ki)));
        let z = _mm256_fmadd_pd(r, _mm256_set1_pd(C0), _mm256_set1_pd(C1));
        let r2 = _mm256_mul_pd(r, r);
        let y = _mm256_fmadd_pd(r, _mm256_set1_pd(C2), _mm256_set1_pd(1.0));
        let y = _mm256_fmadd_pd(z, r2, y);
        _mm256_mul_pd(y, scale)
    }

    /// [`exp_table_path`] on 8 values with AVX-512: the same operations; the table read as two
    /// two-register permutes (entries 0–15 and 16–31) and a blend on bit 4 of the index.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn exp_table_path_512(xd: __m512d) -> __m512d {
        let inv_ln2_n = _mm512_set1_pd(INV_LN2_N);
        let shift = _mm512_set1_pd(SHIFT);
        let shifted = _mm512_fmadd_pd(xd, inv_ln2_n, shift);
        let kd = _mm512_sub_pd(shifted, shift);
        let r = _mm512_fmsub_pd(inv_ln2_n, xd, kd);
        let ki = _mm512_castpd_si512(shifted);
        let table = |from: usize| {
            // SAFETY: `from + 8 <= 32` entries of the table (unaligned load).
            unsafe { _mm512_loadu_si512(TABLE[from..from + 8].as_ptr().cast()) }
        };
        let low = _mm512_permutex2var_epi64(table(0), ki, table(8));
        let high = _mm512_permutex2var_epi64(table(16), ki, table(24));
        let upper_half = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
        let entry = _mm512_mask_blend_epi64(upper_half, low, high);
        let scale = _mm512_castsi512_pd(_mm512_add_epi64(entry, _mm512_slli_epi64::<47>(ki)));
        let z = _mm512_fmadd_pd(r, _mm512_set1_pd(C0), _mm512_set1_pd(C1));
        let r2 = _mm512_mul_pd(r, r);
        let y = _mm512_fmadd_pd(r, _mm512_set1_pd(C2), _mm512_set1_pd(1.0));
        let y = _mm512_fmadd_pd(z, r2, y);
        _mm512_mul_pd(y, scale)
    }

    /// `exp` in place, 16 values at a time with AVX-512 (see [`exp_in_place_avx2`]).
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn exp_in_place_avx512(values: &mut [f32]) {
        let mut chunks = values.chunks_exact_mut(16);
        for chunk in &mut chunks {
            // SAFETY: `chunk` holds exactly 16 f32 (unaligned load and store).
            let x = unsafe { _mm512_loadu_ps(chunk.as_ptr()) };
            let magnitude =
                _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fff_ffff));
            let outside = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x42af_ffff));
            let low = exp_table_path_512(_mm512_cvtps_pd(_mm512_castps512_ps256(x)));
            let high = exp_table_path_512(_mm512_cvtps_pd(_mm256_castpd_ps(
                _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x)),
            )));
            let y = _mm512_castpd_ps(_mm512_insertf64x4::<1>(
                _mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(low))),
                _mm256_castps_pd(_mm512_cvtpd_ps(high)),
            ));
            // SAFETY: as the load.
            unsafe { _mm512_storeu_ps(chunk.as_mut_ptr(), y) };
            if outside != 0 {
                let mut inputs = [0.0f32; 16];
                // SAFETY: `inputs` holds 16 f32.
                unsafe { _mm512_storeu_ps(inputs.as_mut_ptr(), x) };
                for (lane, input) in inputs.iter().enumerate() {
                    if outside & (1 << lane) != 0 {
                        chunk[lane] = input.exp();
                    }
                }
            }
        }
        // SAFETY: the caller's AVX-512F implies AVX2 and FMA.
        unsafe { exp_in_place_avx2(chunks.into_remainder()) };
    }

    /// `exp` in place, 8 values at a time; lanes outside the table path (`|x| >= 88`, NaN) and
    /// the last `len % 8` values through `f32::exp`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn exp_in_place_avx2(values: &mut [f32]) {
        let mut chunks = values.chunks_exact_mut(8);
        for chunk in &mut chunks {
            // SAFETY: `chunk` holds exactly 8 f32 (unaligned load and store).
            let x = unsafe { _mm256_loadu_ps(chunk.as_ptr()) };
            let magnitude =
                _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fff_ffff));
            let outside = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(
                magnitude,
                _mm256_set1_epi32(0x42af_ffff),
            )));
            let low = exp_table_path(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
            let high = exp_table_path(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)));
            let y = _mm256_set_m128(_mm256_cvtpd_ps(high), _mm256_cvtpd_ps(low));
            // SAFETY: as the load.
            unsafe { _mm256_storeu_ps(chunk.as_mut_ptr(), y) };
            if outside != 0 {
                let mut inputs = [0.0f32; 8];
                // SAFETY: `inputs` holds 8 f32.
                unsafe { _mm256_storeu_ps(inputs.as_mut_ptr(), x) };
                for (lane, input) in inputs.iter().enumerate() {
                    if outside & (1 << lane) != 0 {
                        chunk[lane] = input.exp();
                    }
                }
            }
        }
        for x in chunks.into_remainder() {
            *x = x.exp();
        }
    }
}
