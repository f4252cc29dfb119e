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
/// Measured on Sapphire Rapids, 48 rows embed 3-4 % faster than 96 (36 and 24 no faster than 48).
const ROW_BLOCK: usize = 48;

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
        let mut packed = Packed::rows(Rows { data: weight, m: n, stride: k }, k, kernels);
        packed.bias[..n].copy_from_slice(bias);
        packed
    }

    /// Packs the weight whose n rows of k are `weight`'s rows (read in place, `stride` apart: one attention
    /// head's keys inside the rows of `[q | k | v]`), with a zero bias.
    pub(crate) fn rows(weight: Rows<'_>, k: usize, kernels: Kernels) -> Packed {
        let (n, width) = (weight.m, kernels.panel_width());
        let panels = n.div_ceil(width);
        let mut data = vec![0.0f32; panels * width * k];
        for (panel, target) in data.chunks_exact_mut(k * width).enumerate() {
            let columns: Vec<&[f32]> = (panel * width..n.min((panel + 1) * width))
                .map(|column| &weight.data[column * weight.stride..][..k])
                .collect();
            // Written in order (each step a run of the panel), read across the rows: the other way round, a
            // store every 128 bytes, took 2.4 times as long.
            for (p, run) in target.chunks_exact_mut(width).enumerate() {
                for (value, column) in run.iter_mut().zip(&columns) {
                    *value = column[p];
                }
            }
        }
        Packed { n, k, width, data, bias: vec![0.0; panels * width] }
    }

    /// Packs the weight (n × k) whose transpose is `transposed`: k rows of n, read in place `stride` apart (one
    /// attention head's values), with a zero bias. Each of its rows is a run of a panel as it is.
    pub(crate) fn columns(transposed: Rows<'_>, n: usize, kernels: Kernels) -> Packed {
        let (k, width) = (transposed.m, kernels.panel_width());
        let panels = n.div_ceil(width);
        let mut data = vec![0.0f32; panels * width * k];
        for (panel, target) in data.chunks_exact_mut(k * width).enumerate() {
            let first = panel * width;
            let kept = width.min(n - first);
            for (p, run) in target.chunks_exact_mut(width).enumerate() {
                run[..kept].copy_from_slice(&transposed.data[p * transposed.stride + first..][..kept]);
            }
        }
        Packed { n, k, width, data, bias: vec![0.0; panels * width] }
    }
}

/// `m` rows of `k` floats in memory, `stride` apart (a view into a wider matrix, such as one head's queries).
#[derive(Clone, Copy)]
pub(crate) struct Rows<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) m: usize,
    pub(crate) stride: usize,
}

/// `out (m × n) = bias + a (m × k) · wᵀ` for contiguous matrices.
pub(crate) fn linear(kernels: Kernels, a: &[f32], m: usize, w: &Packed, out: &mut [f32]) {
    linear_then(kernels, a, m, w, out, |_, _| {});
}

/// [`linear`], then `then(first, rows)` on each block of finished rows (`rows` holds rows `first..`, each n
/// wide), on the thread that computed them while they are still in its cache: the row-wise steps that follow a
/// product (GELU; a residual and a layer norm) without another pass over the whole output through memory.
pub(crate) fn linear_then(
    kernels: Kernels,
    a: &[f32],
    m: usize,
    w: &Packed,
    out: &mut [f32],
    then: impl Fn(usize, &mut [f32]) + Sync,
) {
    assert_eq!(a.len(), m * w.k);
    assert_eq!(out.len(), m * w.n);
    blocks(kernels, Rows { data: a, m, stride: w.k }, w, out, w.n, then);
}

/// `out = bias + a · wᵀ`, where row i of the result is written at `out[i * out_stride..][..n]`; rows split
/// among the threads in blocks.
pub(crate) fn product(kernels: Kernels, a: Rows<'_>, w: &Packed, out: &mut [f32], out_stride: usize) {
    blocks(kernels, a, w, out, out_stride, |_, _| {});
}

fn blocks(
    kernels: Kernels,
    a: Rows<'_>,
    w: &Packed,
    out: &mut [f32],
    out_stride: usize,
    then: impl Fn(usize, &mut [f32]) + Sync,
) {
    assert_eq!(w.width, kernels.panel_width());
    assert!(a.m == 0 || a.data.len() >= (a.m - 1) * a.stride + w.k);
    assert!(a.m == 0 || out.len() >= (a.m - 1) * out_stride + w.n);
    out.par_chunks_mut(ROW_BLOCK * out_stride).enumerate().for_each(|(block, out)| {
        let first = block * ROW_BLOCK;
        let rows = ROW_BLOCK.min(a.m - first);
        let block = Rows { data: &a.data[first * a.stride..], m: rows, stride: a.stride };
        match kernels {
            // SAFETY: Kernels::Avx512 and Avx2 are only constructed after the CPU was found to have them.
            Kernels::Avx512 => unsafe { avx512::block(block, w, out, out_stride) },
            Kernels::Avx2 => unsafe { avx2::block(block, w, out, out_stride) },
            Kernels::Scalar => scalar::block(block, w, out, out_stride),
        }
        then(first, out);
    });
}

/// Where a tile reads its `rows` rows of `a`.
enum Tile<'a> {
    /// Repacked: row r's element p at `p * rows + r`.
    Packed(&'a [f32]),
    /// In place: row r's element p at `r * lda + p`.
    InPlace { a: &'a [f32], lda: usize },
    /// In place, each element also written to `copy` repacked as it is read (the first panel's pass), for
    /// the panels after it.
    Repacking { a: &'a [f32], lda: usize, copy: &'a mut [f32] },
}

/// One block of rows through every panel: the driver each kernel set shares. With more than one panel, the
/// first panel's tiles read the block's rows in place and leave them repacked (for each k, the tile's rows
/// side by side), so the later panels' broadcasts share a cache line; the repacking then waits on no load of
/// its own, since the first panel's arithmetic covers the rows' arrival from memory. With one panel (an
/// attention head's values) nothing is repacked. `tile(rows, take, panel, bias, c, ldc)` computes up to `mr`
/// rows of one panel into `c`.
#[inline(always)]
fn drive(
    a: Rows<'_>,
    w: &Packed,
    out: &mut [f32],
    ldc: usize,
    mr: usize,
    mut tile: impl FnMut(Tile<'_>, usize, &[f32], &[f32], &mut [f32], usize),
) {
    let (k, n, width, rows) = (w.k, w.n, w.width, a.m);
    let mut scratch = vec![0.0f32; mr * width];
    let direct = n <= width;
    let mut packed = vec![0.0f32; if direct { 0 } else { rows * k }];
    for panel in 0..n.div_ceil(width) {
        let weights = &w.data[panel * k * width..(panel + 1) * k * width];
        let bias = &w.bias[panel * width..(panel + 1) * width];
        let first = panel * width;
        let full = first + width <= n;
        let mut row = 0;
        while row < rows {
            let take = mr.min(rows - row);
            let in_place = &a.data[row * a.stride..(row + take - 1) * a.stride + k];
            let source = if direct {
                Tile::InPlace { a: in_place, lda: a.stride }
            } else if panel == 0 {
                Tile::Repacking { a: in_place, lda: a.stride, copy: &mut packed[row * k..(row + take) * k] }
            } else {
                Tile::Packed(&packed[row * k..(row + take) * k])
            };
            if full {
                tile(source, take, weights, bias, &mut out[row * ldc + first..], ldc);
            } else {
                // The last, partial panel goes through a scratch tile; only its real columns are kept.
                tile(source, take, weights, bias, &mut scratch, width);
                let kept = n - first;
                for r in 0..take {
                    out[(row + r) * ldc + first..(row + r) * ldc + n]
                        .copy_from_slice(&scratch[r * width..r * width + kept]);
                }
            }
            row += take;
        }
    }
}

/// Row `r`'s element `p` of a tile of `R` rows: repacked, or in place with rows `lda` apart.
#[inline(always)]
fn at<const R: usize, const PACKED: bool>(lda: usize, r: usize, p: usize) -> usize {
    if PACKED { p * R + r } else { r * lda + p }
}

/// Checks that a tile of `take` rows of k holds them (and, repacking, has room for their copy): once per tile,
/// so the kernels may read and write by pointer.
#[inline(always)]
fn check(source: &Tile<'_>, take: usize, k: usize) {
    match source {
        Tile::Packed(a) => assert!(a.len() >= take * k),
        Tile::InPlace { a, lda } => assert!(a.len() >= (take - 1) * lda + k),
        Tile::Repacking { a, lda, copy } => {
            assert!(a.len() >= (take - 1) * lda + k && copy.len() >= take * k)
        }
    }
}

mod avx512 {
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::*;

    use super::{Packed, Rows, Tile, at, check, drive};

    const MR: usize = 12;
    /// How many steps of k ahead a tile asks for its panel's (and repacked rows') cache lines: the hardware
    /// prefetchers alone left a tile waiting on L2 (on Sapphire Rapids 10 % more GFLOP/s with it; 4 to 16 steps
    /// are alike, 32 is too far).
    const PREFETCH: usize = 16;

    /// # Safety
    /// The CPU must support AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn block(a: Rows<'_>, w: &Packed, out: &mut [f32], ldc: usize) {
        let k = w.k;
        drive(a, w, out, ldc, MR, |source, take, b, bias, c, ldc| {
            check(&source, take, k);
            assert!(b.len() == k * 32 && bias.len() >= 32 && c.len() >= (take - 1) * ldc + 32);
            // SAFETY: `check` and the assertion above checked the rows, the copy, the panel, the bias and the
            // outputs; the CPU has AVX-512F (this function's precondition).
            unsafe {
                let none = std::ptr::null_mut();
                match source {
                    Tile::Packed(a) => tiles::<true, false>(take, a.as_ptr(), 0, none, b, bias, c, ldc),
                    Tile::InPlace { a, lda } => {
                        tiles::<false, false>(take, a.as_ptr(), lda, none, b, bias, c, ldc)
                    }
                    Tile::Repacking { a, lda, copy } => {
                        tiles::<false, true>(take, a.as_ptr(), lda, copy.as_mut_ptr(), b, bias, c, ldc)
                    }
                }
            }
        });
    }

    /// # Safety
    /// As [`tile`]'s, for `take` rows.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tiles<const PACKED: bool, const COPY: bool>(
        take: usize,
        a: *const f32,
        lda: usize,
        copy: *mut f32,
        b: &[f32],
        bias: &[f32],
        c: &mut [f32],
        ldc: usize,
    ) {
        // SAFETY: this function's precondition.
        unsafe {
            match take {
                12 => tile::<12, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                11 => tile::<11, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                10 => tile::<10, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                9 => tile::<9, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                8 => tile::<8, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                7 => tile::<7, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                6 => tile::<6, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                5 => tile::<5, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                4 => tile::<4, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                3 => tile::<3, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                2 => tile::<2, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                _ => tile::<1, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
            }
        }
    }

    /// # Safety
    /// `a` holds `R` rows of k = `b.len() / 32` (repacked, or `lda` apart), `copy` (with `COPY`) room for
    /// them repacked, `bias` 32 values and `c` `R` rows of 32 outputs `ldc` apart; the CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn tile<const R: usize, const PACKED: bool, const COPY: bool>(
        a: *const f32,
        lda: usize,
        copy: *mut f32,
        b: &[f32],
        bias: &[f32],
        c: &mut [f32],
        ldc: usize,
    ) {
        let k = b.len() / 32;
        let (b, c) = (b.as_ptr(), c.as_mut_ptr());
        // SAFETY: every offset stays within the extents this function's precondition gives.
        unsafe {
            let b0 = _mm512_loadu_ps(bias.as_ptr());
            let b1 = _mm512_loadu_ps(bias.as_ptr().add(16));
            let mut acc = [[b0, b1]; R];
            for p in 0..k {
                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add((p + PREFETCH) * 32) as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add((p + PREFETCH) * 32 + 16) as *const i8);
                if PACKED {
                    _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add((p + PREFETCH) * R) as *const i8);
                }
                let w0 = _mm512_loadu_ps(b.add(p * 32));
                let w1 = _mm512_loadu_ps(b.add(p * 32 + 16));
                for (r, row) in acc.iter_mut().enumerate() {
                    let value = *a.add(at::<R, PACKED>(lda, r, p));
                    if COPY {
                        *copy.add(p * R + r) = value;
                    }
                    let x = _mm512_set1_ps(value);
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
    pub(super) unsafe fn block(a: Rows<'_>, w: &Packed, out: &mut [f32], ldc: usize) {
        super::scalar::block(a, w, out, ldc)
    }
}

mod avx2 {
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::*;

    use super::{Packed, Rows, Tile, at, check, drive};

    const MR: usize = 6;

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn block(a: Rows<'_>, w: &Packed, out: &mut [f32], ldc: usize) {
        let k = w.k;
        drive(a, w, out, ldc, MR, |source, take, b, bias, c, ldc| {
            check(&source, take, k);
            assert!(b.len() == k * 16 && bias.len() >= 16 && c.len() >= (take - 1) * ldc + 16);
            // SAFETY: `check` and the assertion above checked the rows, the copy, the panel, the bias and the
            // outputs; the CPU has AVX2 and FMA (this function's precondition).
            unsafe {
                let none = std::ptr::null_mut();
                match source {
                    Tile::Packed(a) => tiles::<true, false>(take, a.as_ptr(), 0, none, b, bias, c, ldc),
                    Tile::InPlace { a, lda } => {
                        tiles::<false, false>(take, a.as_ptr(), lda, none, b, bias, c, ldc)
                    }
                    Tile::Repacking { a, lda, copy } => {
                        tiles::<false, true>(take, a.as_ptr(), lda, copy.as_mut_ptr(), b, bias, c, ldc)
                    }
                }
            }
        });
    }

    /// # Safety
    /// As [`tile`]'s, for `take` rows.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tiles<const PACKED: bool, const COPY: bool>(
        take: usize,
        a: *const f32,
        lda: usize,
        copy: *mut f32,
        b: &[f32],
        bias: &[f32],
        c: &mut [f32],
        ldc: usize,
    ) {
        // SAFETY: this function's precondition.
        unsafe {
            match take {
                6 => tile::<6, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                5 => tile::<5, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                4 => tile::<4, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                3 => tile::<3, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                2 => tile::<2, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
                _ => tile::<1, PACKED, COPY>(a, lda, copy, b, bias, c, ldc),
            }
        }
    }

    /// # Safety
    /// `a` holds `R` rows of k = `b.len() / 16` (repacked, or `lda` apart), `copy` (with `COPY`) room for
    /// them repacked, `bias` 16 values and `c` `R` rows of 16 outputs `ldc` apart; the CPU has AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn tile<const R: usize, const PACKED: bool, const COPY: bool>(
        a: *const f32,
        lda: usize,
        copy: *mut f32,
        b: &[f32],
        bias: &[f32],
        c: &mut [f32],
        ldc: usize,
    ) {
        let k = b.len() / 16;
        let (b, c) = (b.as_ptr(), c.as_mut_ptr());
        // SAFETY: every offset stays within the extents this function's precondition gives.
        unsafe {
            let b0 = _mm256_loadu_ps(bias.as_ptr());
            let b1 = _mm256_loadu_ps(bias.as_ptr().add(8));
            let mut acc = [[b0, b1]; R];
            for p in 0..k {
                let w0 = _mm256_loadu_ps(b.add(p * 16));
                let w1 = _mm256_loadu_ps(b.add(p * 16 + 8));
                for (r, row) in acc.iter_mut().enumerate() {
                    let value = *a.add(at::<R, PACKED>(lda, r, p));
                    if COPY {
                        *copy.add(p * R + r) = value;
                    }
                    let x = _mm256_set1_ps(value);
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
    pub(super) unsafe fn block(a: Rows<'_>, w: &Packed, out: &mut [f32], ldc: usize) {
        super::scalar::block(a, w, out, ldc)
    }
}

/// Portable kernels: the same chain with `f32::mul_add` (a single rounding, like the vector FMAs).
pub(super) mod scalar {
    use super::{Packed, Rows, Tile, drive};

    const MR: usize = 4;
    /// Columns per panel.
    pub(crate) const WIDTH: usize = 8;

    pub(crate) fn block(a: Rows<'_>, w: &Packed, out: &mut [f32], ldc: usize) {
        drive(a, w, out, ldc, MR, |source, take, b, bias, c, ldc| {
            let k = b.len() / WIDTH;
            let (a, lda, mut copy) = match source {
                Tile::Packed(a) => (a, 0, None),
                Tile::InPlace { a, lda } => (a, lda, None),
                Tile::Repacking { a, lda, copy } => (a, lda, Some(copy)),
            };
            for r in 0..take {
                let mut acc = [0.0f32; WIDTH];
                acc.copy_from_slice(&bias[..WIDTH]);
                for p in 0..k {
                    let x = if lda == 0 { a[p * take + r] } else { a[r * lda + p] };
                    if let Some(copy) = copy.as_deref_mut() {
                        copy[p * take + r] = x;
                    }
                    for (j, value) in acc.iter_mut().enumerate() {
                        *value = x.mul_add(b[p * WIDTH + j], *value);
                    }
                }
                c[r * ldc..r * ldc + WIDTH].copy_from_slice(&acc);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect()
    }

    /// The definition of one output element: `bias`, then one fused multiply-add per k, in k order.
    fn chain(bias: f32, a: &[f32], w: &[f32]) -> f32 {
        a.iter().zip(w).fold(bias, |acc, (x, y)| x.mul_add(*y, acc))
    }

    /// Every kernel computes each element as `bias + Σ a·w` by one fma chain in k order, whatever the shape.
    #[test]
    fn every_kernel_gives_the_fma_chain_bits_for_every_shape() {
        for (m, n, k) in
            [(1, 8, 3), (5, 40, 17), (13, 96, 32), (100, 33, 64), (25, 1152, 384), (30, 32, 50), (29, 20, 7)]
        {
            let a = random(m * k, 1);
            let w = random(n * k, 2);
            let bias = random(n, 3);
            let expected: Vec<u32> = (0..m * n)
                .map(|at| {
                    let (i, j) = (at / n, at % n);
                    chain(bias[j], &a[i * k..][..k], &w[j * k..][..k]).to_bits()
                })
                .collect();
            for kernels in Kernels::available() {
                let packed = Packed::new(&w, &bias, n, k, kernels);
                let mut out = vec![0.0f32; m * n];
                linear(kernels, &a, m, &packed, &mut out);
                let bits: Vec<u32> = out.iter().map(|x| x.to_bits()).collect();
                assert_eq!(bits, expected, "{kernels:?} at {m}x{n}x{k}");
            }
        }
    }

    /// A step after each block of `linear_then` equals the same step after the whole product: over several
    /// blocks and a partial one, with a step that is not idempotent and depends on the row, so a wrong first
    /// row, a block left out or a block stepped twice gives other bits.
    #[test]
    fn the_step_after_each_block_sees_that_blocks_rows_once() {
        let (m, n, k) = (2 * ROW_BLOCK + 7, 48, 40);
        let (a, w, bias, residual) = (random(m * k, 1), random(n * k, 2), random(n, 3), random(m * n, 4));
        let step = |first: usize, rows: &mut [f32]| {
            for (t, r) in rows.iter_mut().zip(&residual[first * n..]) {
                *t = (*t + *r) * 2.0;
            }
        };
        for kernels in Kernels::available() {
            let packed = Packed::new(&w, &bias, n, k, kernels);
            let mut whole = vec![0.0f32; m * n];
            linear(kernels, &a, m, &packed, &mut whole);
            step(0, &mut whole);
            let mut fused = vec![0.0f32; m * n];
            linear_then(kernels, &a, m, &packed, &mut fused, step);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fused), bits(&whole), "{kernels:?}");
        }
    }

    /// An attention head's keys and values packed where they lie are the panels of the same weights copied
    /// out first (keys as rows, values transposed), with a zero bias, for every kernel's panel width.
    #[test]
    fn packing_keys_and_values_in_place_equals_packing_a_copy() {
        let (stride, offset, k) = (45, 7, 11);
        for n in [1, 8, 16, 31, 32, 33, 70] {
            let qkv = random(n.max(k) * stride, 8);
            let keys: Vec<f32> = (0..n).flat_map(|j| qkv[j * stride + offset..][..k].to_vec()).collect();
            let values: Vec<f32> = (0..n)
                .flat_map(|d| (0..k).map(move |p| (d, p)))
                .map(|(d, p)| qkv[p * stride + offset + d])
                .collect();
            for kernels in Kernels::available() {
                let zero = vec![0.0; n];
                let copied = Packed::new(&keys, &zero, n, k, kernels);
                let in_place = Packed::rows(Rows { data: &qkv[offset..], m: n, stride }, k, kernels);
                assert_eq!((in_place.n, in_place.k), (n, k));
                assert_eq!(in_place.data, copied.data, "{kernels:?} keys, n {n}");
                assert_eq!(in_place.bias, copied.bias);
                let copied = Packed::new(&values, &zero, n, k, kernels);
                let in_place = Packed::columns(Rows { data: &qkv[offset..], m: k, stride }, n, kernels);
                assert_eq!((in_place.n, in_place.k), (n, k));
                assert_eq!(in_place.data, copied.data, "{kernels:?} values, n {n}");
                assert_eq!(in_place.bias, copied.bias);
            }
        }
    }

    /// Rows read in place from a wider matrix (one panel: no repacking) give the same chain's bits.
    #[test]
    fn a_strided_view_gives_the_fma_chain_bits() {
        let (m, k, stride, ldc) = (27, 40, 61, 37);
        let a = random(m * stride, 4);
        for n in [8, 16, 20, 32, 33] {
            let w = random(n * k, 5);
            let bias = random(n, 6);
            for kernels in Kernels::available() {
                let packed = Packed::new(&w, &bias, n, k, kernels);
                let mut out = vec![0.0f32; (m - 1) * ldc + n.max(ldc)];
                product(kernels, Rows { data: &a, m, stride }, &packed, &mut out, ldc);
                for i in 0..m {
                    for j in 0..n {
                        let expected = chain(bias[j], &a[i * stride..][..k], &w[j * k..][..k]);
                        assert_eq!(
                            out[i * ldc + j].to_bits(),
                            expected.to_bits(),
                            "{kernels:?} n {n} at {i},{j}"
                        );
                    }
                }
            }
        }
    }
}
