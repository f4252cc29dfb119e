//! Linear layers: `out = bias + a · wᵀ` for activations `a` (m × k, row-major) and a weight `w` (n × k, as
//! PyTorch stores it) packed once into panels of `Kernels::panel_width` columns.
//!
//! Every output element is one fused multiply-add chain over k in increasing order, starting from its bias:
//! `acc = bias; acc = fma(a[k], w[k], acc)` for k = 0, 1, ... The same operations in the same order whatever m
//! is, whichever tile or thread computes the element, and whichever instruction set runs (an AVX-512 FMA, an
//! AVX2 FMA and `f32::mul_add` all round once). That is what makes a text's vector independent of its batch,
//! of the thread count, and of the machine's vector width.

use rayon::prelude::*;

use super::Kernels;

/// Rows of `a` one task handles: a block of them stays in L2 while every panel of the weight passes by.
const ROW_BLOCK: usize = 96;

/// A weight matrix (n × k) and its bias, packed into column panels for one kind of kernel.
pub(crate) struct Packed {
    /// Output width.
    pub(crate) n: usize,
    /// Input width.
    pub(crate) k: usize,
    width: usize,
    /// Panel by panel: for each k, `width` consecutive weights (zero beyond n).
    data: Vec<f32>,
    /// The bias, zero-padded to whole panels.
    bias: Vec<f32>,
}

impl Packed {
    /// Packs `weight` (n rows of k, row-major) and `bias` (n) for `kernels`.
    pub(crate) fn new(weight: &[f32], bias: &[f32], n: usize, k: usize, kernels: Kernels) -> Packed {
        let width = kernels.panel_width();
        let panels = n.div_ceil(width);
        let mut data = vec![0.0f32; panels * width * k];
        for panel in 0..panels {
            for p in 0..k {
                for j in 0..width {
                    let column = panel * width + j;
                    if column < n {
                        data[(panel * k + p) * width + j] = weight[column * k + p];
                    }
                }
            }
        }
        let mut padded = bias.to_vec();
        padded.resize(panels * width, 0.0);
        Packed { n, k, width, data, bias: padded }
    }
}

/// `out (m × n) = bias + a (m × k) · wᵀ`, rows split among the threads in blocks.
pub(crate) fn linear(kernels: Kernels, a: &[f32], m: usize, w: &Packed, out: &mut [f32]) {
    debug_assert_eq!(a.len(), m * w.k);
    debug_assert_eq!(out.len(), m * w.n);
    debug_assert_eq!(w.width, kernels.panel_width());
    out.par_chunks_mut(ROW_BLOCK * w.n).zip(a.par_chunks(ROW_BLOCK * w.k)).for_each(|(out, a)| {
        let rows = a.len() / w.k;
        match kernels {
            // SAFETY: Kernels::Avx512 and Avx2 are only constructed after the CPU was found to have them.
            Kernels::Avx512 => unsafe { avx512::block(a, rows, w, out) },
            Kernels::Avx2 => unsafe { avx2::block(a, rows, w, out) },
            Kernels::Scalar => scalar::block(a, rows, w, out),
        }
    });
}

/// One block of rows through every panel: the driver each kernel set shares. `tile(a, rows, panel, bias, c,
/// ldc)` computes up to `mr` rows of one panel into `c`.
#[inline(always)]
fn drive(
    a: &[f32],
    rows: usize,
    w: &Packed,
    out: &mut [f32],
    mr: usize,
    mut tile: impl FnMut(&[f32], usize, &[f32], &[f32], &mut [f32], usize),
) {
    let (k, n, width) = (w.k, w.n, w.width);
    let mut scratch = vec![0.0f32; mr * width];
    for panel in 0..n.div_ceil(width) {
        let weights = &w.data[panel * k * width..(panel + 1) * k * width];
        let bias = &w.bias[panel * width..(panel + 1) * width];
        let first = panel * width;
        let full = first + width <= n;
        let mut row = 0;
        while row < rows {
            let take = mr.min(rows - row);
            let a_tile = &a[row * k..(row + take) * k];
            if full {
                tile(a_tile, take, weights, bias, &mut out[row * n + first..], n);
            } else {
                // The last, partial panel goes through a scratch tile; only its real columns are kept.
                tile(a_tile, take, weights, bias, &mut scratch, width);
                for r in 0..take {
                    let kept = n - first;
                    out[(row + r) * n + first..(row + r) * n + n]
                        .copy_from_slice(&scratch[r * width..r * width + kept]);
                }
            }
            row += take;
        }
    }
}

mod avx512 {
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::*;

    use super::{Packed, drive};

    const MR: usize = 12;

    /// # Safety
    /// The CPU must support AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn block(a: &[f32], rows: usize, w: &Packed, out: &mut [f32]) {
        drive(a, rows, w, out, MR, |a, take, b, bias, c, ldc| {
            // SAFETY: the slices hold `take` rows of k, k panels of 32 weights, 32 biases and `take` rows
            // of at least 32 outputs, `ldc` apart; the CPU has AVX-512F (this function's precondition).
            unsafe {
                match take {
                    12 => tile::<12>(a, b, bias, c, ldc),
                    11 => tile::<11>(a, b, bias, c, ldc),
                    10 => tile::<10>(a, b, bias, c, ldc),
                    9 => tile::<9>(a, b, bias, c, ldc),
                    8 => tile::<8>(a, b, bias, c, ldc),
                    7 => tile::<7>(a, b, bias, c, ldc),
                    6 => tile::<6>(a, b, bias, c, ldc),
                    5 => tile::<5>(a, b, bias, c, ldc),
                    4 => tile::<4>(a, b, bias, c, ldc),
                    3 => tile::<3>(a, b, bias, c, ldc),
                    2 => tile::<2>(a, b, bias, c, ldc),
                    _ => tile::<1>(a, b, bias, c, ldc),
                }
            }
        });
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn tile<const R: usize>(a: &[f32], b: &[f32], bias: &[f32], c: &mut [f32], ldc: usize) {
        let k = a.len() / R;
        debug_assert!(b.len() >= k * 32 && bias.len() >= 32 && c.len() >= (R - 1) * ldc + 32);
        let (a, b, c) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        // SAFETY: every offset stays within the slices checked above.
        unsafe {
            let b0 = _mm512_loadu_ps(bias.as_ptr());
            let b1 = _mm512_loadu_ps(bias.as_ptr().add(16));
            let mut acc = [[b0, b1]; R];
            for p in 0..k {
                let w0 = _mm512_loadu_ps(b.add(p * 32));
                let w1 = _mm512_loadu_ps(b.add(p * 32 + 16));
                for (r, row) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*a.add(r * k + p));
                    row[0] = _mm512_fmadd_ps(x, w0, row[0]);
                    row[1] = _mm512_fmadd_ps(x, w1, row[1]);
                }
            }
            for (r, row) in acc.iter().enumerate() {
                _mm512_storeu_ps(c.add(r * ldc), row[0]);
                _mm512_storeu_ps(c.add(r * ldc + 16), row[1]);
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub(super) unsafe fn block(a: &[f32], rows: usize, w: &Packed, out: &mut [f32]) {
        super::scalar::block(a, rows, w, out)
    }
}

mod avx2 {
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::*;

    use super::{Packed, drive};

    const MR: usize = 6;

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn block(a: &[f32], rows: usize, w: &Packed, out: &mut [f32]) {
        drive(a, rows, w, out, MR, |a, take, b, bias, c, ldc| {
            // SAFETY: as in the AVX-512 block, with panels of 16; the CPU has AVX2 and FMA.
            unsafe {
                match take {
                    6 => tile::<6>(a, b, bias, c, ldc),
                    5 => tile::<5>(a, b, bias, c, ldc),
                    4 => tile::<4>(a, b, bias, c, ldc),
                    3 => tile::<3>(a, b, bias, c, ldc),
                    2 => tile::<2>(a, b, bias, c, ldc),
                    _ => tile::<1>(a, b, bias, c, ldc),
                }
            }
        });
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn tile<const R: usize>(a: &[f32], b: &[f32], bias: &[f32], c: &mut [f32], ldc: usize) {
        let k = a.len() / R;
        debug_assert!(b.len() >= k * 16 && bias.len() >= 16 && c.len() >= (R - 1) * ldc + 16);
        let (a, b, c) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        // SAFETY: every offset stays within the slices checked above.
        unsafe {
            let b0 = _mm256_loadu_ps(bias.as_ptr());
            let b1 = _mm256_loadu_ps(bias.as_ptr().add(8));
            let mut acc = [[b0, b1]; R];
            for p in 0..k {
                let w0 = _mm256_loadu_ps(b.add(p * 16));
                let w1 = _mm256_loadu_ps(b.add(p * 16 + 8));
                for (r, row) in acc.iter_mut().enumerate() {
                    let x = _mm256_set1_ps(*a.add(r * k + p));
                    row[0] = _mm256_fmadd_ps(x, w0, row[0]);
                    row[1] = _mm256_fmadd_ps(x, w1, row[1]);
                }
            }
            for (r, row) in acc.iter().enumerate() {
                _mm256_storeu_ps(c.add(r * ldc), row[0]);
                _mm256_storeu_ps(c.add(r * ldc + 8), row[1]);
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub(super) unsafe fn block(a: &[f32], rows: usize, w: &Packed, out: &mut [f32]) {
        super::scalar::block(a, rows, w, out)
    }
}

/// Portable kernels: the same chain with `f32::mul_add` (a single rounding, like the vector FMAs).
pub(super) mod scalar {
    use super::{Packed, drive};

    const MR: usize = 4;
    /// Columns per panel.
    pub(crate) const WIDTH: usize = 8;

    pub(crate) fn block(a: &[f32], rows: usize, w: &Packed, out: &mut [f32]) {
        drive(a, rows, w, out, MR, |a, take, b, bias, c, ldc| {
            let k = a.len() / take;
            for r in 0..take {
                let mut acc = [0.0f32; WIDTH];
                acc.copy_from_slice(&bias[..WIDTH]);
                for p in 0..k {
                    let x = a[r * k + p];
                    for (j, value) in acc.iter_mut().enumerate() {
                        *value = x.mul_add(b[p * WIDTH + j], *value);
                    }
                }
                c[r * ldc..r * ldc + WIDTH].copy_from_slice(&acc);
            }
        });
    }
}
