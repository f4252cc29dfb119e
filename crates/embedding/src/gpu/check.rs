//! A check of a device's kernels against the CPU's definitions: every kernel of kernels.cu run on fixed inputs,
//! each value compared with what the CPU code it stands for gives. Two extents: the full check, for a person with
//! a GPU (`scifact-audit device --check`) and for the GPU check script (the scalar functions over a dense sweep,
//! products up to MiniLM's shapes, optionally their speed); and the self-check, the same kernels on fewer and
//! smaller inputs, which `--device auto` and `--device cuda` run on a GPU before taking it.
//!
//! Values are compared bit for bit, except that any NaN equals any NaN: a GPU gives the canonical NaN
//! (0x7fffffff) where x86 propagates an operand's (0x7fc00000 and others), and no vector keeps a NaN (a fixture
//! refuses one), so the payload is nothing the CPU path defines.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::backend::{Backend, Buffer, DeviceError, Fields, Kernel};
use super::forward::{self, problem};
use super::{DeviceRequest, open_unvetted};
use crate::checkpoint::Pooling;
use crate::error::{Error, Result};

/// How much a check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    /// Every kernel, the scalar functions at every 2^-12 step over [-100, 100], products up to MiniLM's shapes.
    Full,
    /// Every kernel on small fixed inputs (the scalar functions at every 2^-7 step): seconds on a GPU, what a
    /// device must pass before `auto` or `cuda` embeds on it.
    SelfCheck,
}

impl Extent {
    fn name(self) -> &'static str {
        match self {
            Extent::Full => "full",
            Extent::SelfCheck => "self-check",
        }
    }
}

/// What [`check_kernels`] found.
#[derive(Debug, Clone, Serialize)]
pub struct KernelCheck {
    /// The device, described.
    pub device: String,
    /// `full` or `self-check`.
    pub extent: &'static str,
    /// Inputs each scalar function was evaluated at.
    pub scalar_inputs: usize,
    /// Results (exp, erf and GELU of each input) whose bits differ from the CPU's.
    pub scalar_differing: usize,
    /// Each product shape tried (the linear layers' kernels, with and without GELU, and attention's two), and
    /// how many of its elements differ from the fma chain.
    pub products: Vec<ProductCheck>,
    /// Each case of the other kernels (token embedding, layer norm, softmax, pooling, normalisation), and how
    /// many of its values differ from the CPU code's.
    pub steps: Vec<StepCheck>,
    /// The products' speed on MiniLM's shapes, when asked for.
    pub throughput: Vec<Throughput>,
}

impl KernelCheck {
    /// True when every value had the CPU's bits.
    pub fn exact(&self) -> bool {
        self.scalar_differing == 0
            && self.products.iter().all(|p| p.differing == 0)
            && self.steps.iter().all(|s| s.differing == 0)
    }

    /// The kernels the check ran, by name.
    pub fn kernels(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = std::iter::once(Kernel::ProbeOps.name())
            .chain(self.products.iter().map(|p| p.kernel))
            .chain(self.steps.iter().map(|s| s.kernel))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// What differed, in one line: each kernel with differing values and how many (empty when exact).
    pub fn differences(&self) -> String {
        let mut found: Vec<String> = Vec::new();
        if self.scalar_differing > 0 {
            found.push(format!(
                "{} (exp, erf, GELU): {} values",
                Kernel::ProbeOps.name(),
                self.scalar_differing
            ));
        }
        for product in self.products.iter().filter(|p| p.differing > 0) {
            let [m, n, k] = product.shape;
            let gelu = if product.gelu { " + GELU" } else { "" };
            found.push(format!(
                "{}{gelu} {m}x{n}x{k}: {} of {} elements",
                product.kernel,
                product.differing,
                m * n
            ));
        }
        for step in self.steps.iter().filter(|s| s.differing > 0) {
            found.push(format!(
                "{} ({}): {} of {} values",
                step.kernel, step.case, step.differing, step.values
            ));
        }
        found.join(", ")
    }
}

/// One product shape's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ProductCheck {
    /// The kernel.
    pub kernel: &'static str,
    /// Rows, columns and depth.
    pub shape: [usize; 3],
    /// Whether GELU followed the product (the feed-forward layer's).
    pub gelu: bool,
    /// Elements whose bits differ from the chain's.
    pub differing: usize,
}

/// One case of a kernel other than a product.
#[derive(Debug, Clone, Serialize)]
pub struct StepCheck {
    /// The kernel.
    pub kernel: &'static str,
    /// What was tried, in words.
    pub case: String,
    /// Values compared.
    pub values: usize,
    /// Values whose bits differ from the CPU code's.
    pub differing: usize,
}

/// One product shape's speed.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    /// The kernel.
    pub kernel: &'static str,
    /// Rows, columns and depth.
    pub shape: [usize; 3],
    /// Trillions of floating-point operations a second (2·m·n·k per product), the best of several runs.
    pub tflops: f64,
}

fn failed(error: DeviceError) -> Error {
    Error::Device(error.to_string())
}

/// Whether a device's value is the CPU's: the same bits, or both NaN.
pub(crate) fn same(device: f32, cpu: f32) -> bool {
    device.to_bits() == cpu.to_bits() || (device.is_nan() && cpu.is_nan())
}

fn count_differing(device: &[f32], cpu: &[f32]) -> usize {
    device.iter().zip(cpu).filter(|(d, c)| !same(**d, **c)).count() + device.len().abs_diff(cpu.len())
}

/// Values of a fixed generator in [-0.5, 0.5).
fn random(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

/// The inputs the scalar functions are swept over: every step of 2^-`bits` in [-100, 100], the edges of their
/// clamps, zeros, infinities, NaN, the smallest and largest magnitudes.
fn scalar_inputs(bits: u32) -> Vec<f32> {
    let scale = (1u32 << bits) as f32;
    let end = 100 * (1i32 << bits);
    let mut inputs: Vec<f32> = (-end..=end).map(|i| i as f32 / scale).collect();
    inputs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-40,
        f32::MAX,
        f32::MIN,
        -87.0,
        -87.000_01,
        88.0,
        88.000_01,
        4.0,
        -4.0,
    ]);
    inputs
}

/// Runs the check to `extent` on the device `request` names (`cuda` or `emulated`; `auto` when it finds a GPU),
/// without the self-check that would refuse a device before its kernels could be looked at.
///
/// # Errors
/// [`Error::Device`] when there is no such device, or a launch fails.
pub fn check_kernels(request: DeviceRequest, extent: Extent, throughput: bool) -> Result<KernelCheck> {
    let (opened, why_not) = open_unvetted(request)?;
    let Some(opened) = opened else {
        return Err(Error::Device(match why_not {
            Some(reason) => format!("no GPU to check: {reason}"),
            None => "the CPU has no GPU kernels to check: ask for --device cuda or emulated".to_owned(),
        }));
    };
    check_on(opened.backend, opened.device.describe(), extent, throughput)
}

/// The products tried: (m, n, k) of the linear layers' kernels; of attention's scores (len, len, head width)
/// and context (len, head width, len).
struct Shapes {
    scalar_bits: u32,
    wide: &'static [(usize, usize, usize)],
    gelu: &'static [(usize, usize, usize)],
    scores: &'static [(usize, usize, usize)],
    context: &'static [(usize, usize, usize)],
}

const FULL: Shapes = Shapes {
    scalar_bits: 12,
    wide: &[
        (1, 8, 3),
        (5, 40, 17),
        (13, 96, 32),
        (100, 33, 64),
        (129, 130, 131),
        (257, 384, 384),
        (64, 1536, 384),
    ],
    gelu: &[(13, 96, 32), (129, 1536, 384)],
    scores: &[(1, 1, 8), (7, 7, 8), (65, 65, 32), (130, 130, 12), (256, 256, 32)],
    context: &[(1, 8, 1), (7, 8, 7), (65, 32, 65), (130, 12, 130), (256, 32, 256)],
};

const SELF_CHECK: Shapes = Shapes {
    scalar_bits: 7,
    wide: &[(1, 8, 3), (5, 40, 17), (129, 130, 131)],
    gelu: &[(13, 96, 32)],
    scores: &[(7, 7, 8), (65, 65, 32)],
    context: &[(7, 8, 7), (65, 32, 65)],
};

/// [`check_kernels`] on `backend`, described as `device`, to `extent`.
pub(crate) fn check_on(
    backend: Arc<dyn Backend>,
    device: String,
    extent: Extent,
    throughput: bool,
) -> Result<KernelCheck> {
    let shapes = match extent {
        Extent::Full => &FULL,
        Extent::SelfCheck => &SELF_CHECK,
    };
    let b = &backend;
    let (scalar_inputs, scalar_differing) = check_scalars(b, shapes.scalar_bits).map_err(failed)?;
    let mut products = Vec::new();
    for kernel in WIDE {
        for shape in shapes.wide {
            products.push(check_product(b, kernel, *shape, false).map_err(failed)?);
        }
        for shape in shapes.gelu {
            products.push(check_product(b, kernel, *shape, true).map_err(failed)?);
        }
    }
    for shape in shapes.scores {
        products.push(check_product(b, Kernel::GemmScores, *shape, false).map_err(failed)?);
    }
    for shape in shapes.context {
        products.push(check_product(b, Kernel::GemmContext, *shape, false).map_err(failed)?);
    }
    let mut steps = Vec::new();
    steps.push(check_embed_tokens(b).map_err(failed)?);
    for width in [40, 384] {
        for residual in [false, true] {
            steps.push(check_layer_norm(b, width, residual).map_err(failed)?);
        }
    }
    for bias in [false, true] {
        steps.push(check_softmax(b, bias).map_err(failed)?);
    }
    for pooling in [Pooling::Cls, Pooling::Mean, Pooling::Max] {
        steps.push(check_pool(b, pooling).map_err(failed)?);
    }
    steps.push(check_normalize(b).map_err(failed)?);
    let mut speeds = Vec::new();
    if throughput {
        for kernel in WIDE {
            for (m, n, k) in [(49_152, 1536, 384), (49_152, 384, 1536), (49_152, 1152, 384)] {
                speeds.push(measure(b, kernel, (m, n, k)).map_err(failed)?);
            }
        }
    }
    Ok(KernelCheck {
        device,
        extent: extent.name(),
        scalar_inputs,
        scalar_differing,
        products,
        steps,
        throughput: speeds,
    })
}

fn check_scalars(backend: &Arc<dyn Backend>, bits: u32) -> std::result::Result<(usize, usize), DeviceError> {
    let inputs = scalar_inputs(bits);
    let count = inputs.len();
    let input = Buffer::with_f32(backend, &inputs)?;
    let outputs = [
        Buffer::new(backend, 4 * count)?,
        Buffer::new(backend, 4 * count)?,
        Buffer::new(backend, 4 * count)?,
    ];
    let arguments = Fields::new()
        .pointer(input.address())
        .pointer(outputs[0].address())
        .pointer(outputs[1].address())
        .pointer(outputs[2].address())
        .i64(count as i64)
        .bytes();
    backend.launch(Kernel::ProbeOps, [count.div_ceil(256) as u32, 1, 1], [256, 1, 1], &arguments)?;
    let got = [outputs[0].read_f32(count)?, outputs[1].read_f32(count)?, outputs[2].read_f32(count)?];
    let mut differing = 0;
    for (i, x) in inputs.iter().enumerate() {
        let expected = [crate::bert::exp(*x), crate::bert::erf(*x), crate::bert::gelu_one(*x)];
        differing +=
            got.iter().map(|g| g[i]).zip(expected).filter(|(value, want)| !same(*value, *want)).count();
    }
    Ok((count, differing))
}

/// The linear layers' products: one source, two register budgets.
const WIDE: [Kernel; 2] = [Kernel::GemmWide, Kernel::GemmWide2];

/// One product of `kernel` against the chain that defines each element: from the bias (the linear layers') or
/// +0 (attention's), over k ascending, then GELU when `gelu`. The second operand is laid out as the kernel reads
/// it: k rows of n (a weight stored transposed, an attention head's values), or n rows of k (a head's keys).
fn check_product(
    backend: &Arc<dyn Backend>,
    kernel: Kernel,
    (m, n, k): (usize, usize, usize),
    gelu: bool,
) -> std::result::Result<ProductCheck, DeviceError> {
    let a = random(m * k, 1);
    let w = random(n * k, 2);
    let with_bias = matches!(kernel, Kernel::GemmWide | Kernel::GemmWide2);
    let bias = if with_bias { random(n, 3) } else { vec![0.0; n] };
    let k_major = kernel != Kernel::GemmScores;
    let (b, ldb) = if k_major {
        let mut transposed = vec![0.0f32; n * k];
        for (row, weights) in w.chunks_exact(k).enumerate() {
            for (column, value) in weights.iter().enumerate() {
                transposed[column * n + row] = *value;
            }
        }
        (transposed, n)
    } else {
        (w.clone(), k)
    };
    let a_buffer = Buffer::with_f32(backend, &a)?;
    let b_buffer = Buffer::with_f32(backend, &b)?;
    let bias_buffer = Buffer::with_f32(backend, &bias)?;
    let out = Buffer::new(backend, 4 * m * n)?;
    let table = Buffer::with_bytes(backend, &problem(0, 0, 0, (m, n, k), (k, ldb, n)))?;
    let bias_address = if with_bias { bias_buffer.address() } else { 0 };
    forward::product(
        kernel,
        [a_buffer.address(), b_buffer.address(), bias_address, out.address()],
        table.address(),
        (m, n),
        gelu,
    )?
    .on(backend)?;
    let got = out.read_f32(m * n)?;
    let mut expected = Vec::with_capacity(m * n);
    for row in 0..m {
        for column in 0..n {
            let chain = a[row * k..(row + 1) * k]
                .iter()
                .zip(&w[column * k..(column + 1) * k])
                .fold(bias[column], |acc, (x, y)| x.mul_add(*y, acc));
            expected.push(if gelu { crate::bert::gelu_one(chain) } else { chain });
        }
    }
    Ok(ProductCheck {
        kernel: kernel.name(),
        shape: [m, n, k],
        gelu,
        differing: count_differing(&got, &expected),
    })
}

/// The embeddings' sum, `(word + position) + token type`, for ids and positions spread over their tables.
fn check_embed_tokens(backend: &Arc<dyn Backend>) -> std::result::Result<StepCheck, DeviceError> {
    let (vocabulary, places, hidden, tokens) = (50, 60, 40, 37);
    let words = random(vocabulary * hidden, 11);
    let positions = random(places * hidden, 12);
    let token_type = random(hidden, 13);
    let ids: Vec<u32> = (0..tokens).map(|t| ((t * 7 + 3) % vocabulary) as u32).collect();
    let at: Vec<u32> = (0..tokens).map(|t| ((t * 5) % places) as u32).collect();
    let buffers = [
        Buffer::with_u32(backend, &ids)?,
        Buffer::with_u32(backend, &at)?,
        Buffer::with_f32(backend, &words)?,
        Buffer::with_f32(backend, &positions)?,
        Buffer::with_f32(backend, &token_type)?,
        Buffer::new(backend, 4 * tokens * hidden)?,
    ];
    forward::embed_tokens(
        [buffers[0].address(), buffers[1].address()],
        [buffers[2].address(), buffers[3].address(), buffers[4].address()],
        buffers[5].address(),
        tokens,
        hidden,
    )?
    .on(backend)?;
    let got = buffers[5].read_f32(tokens * hidden)?;
    let mut expected = Vec::with_capacity(tokens * hidden);
    for (id, place) in ids.iter().zip(&at) {
        for d in 0..hidden {
            let (w, p) = (words[*id as usize * hidden + d], positions[*place as usize * hidden + d]);
            expected.push((w + p) + token_type[d]);
        }
    }
    Ok(StepCheck {
        kernel: Kernel::EmbedTokens.name(),
        case: format!("{tokens} tokens of {hidden}"),
        values: expected.len(),
        differing: count_differing(&got, &expected),
    })
}

/// Layer norm of rows of `width` (after a residual when `residual`), against `bert::layer_norm_rows`.
fn check_layer_norm(
    backend: &Arc<dyn Backend>,
    width: usize,
    residual: bool,
) -> std::result::Result<StepCheck, DeviceError> {
    let rows = 21;
    let eps = if width == 384 { 1e-12 } else { 1e-5 };
    // Rows of differing scale and offset, so that means and variances are far from 0 and 1.
    let x: Vec<f32> = random(rows * width, 21)
        .iter()
        .enumerate()
        .map(|(i, v)| v * (1 + i / width) as f32 + (i / width) as f32 * 0.25)
        .collect();
    let added = random(rows * width, 22);
    let gamma: Vec<f32> = random(width, 23).iter().map(|g| g + 1.0).collect();
    let beta = random(width, 24);
    let x_buffer = Buffer::with_f32(backend, &x)?;
    let residual_buffer = Buffer::with_f32(backend, &added)?;
    let gamma_buffer = Buffer::with_f32(backend, &gamma)?;
    let beta_buffer = Buffer::with_f32(backend, &beta)?;
    forward::layer_norm(
        x_buffer.address(),
        if residual { residual_buffer.address() } else { 0 },
        [gamma_buffer.address(), beta_buffer.address()],
        (rows, width),
        eps,
    )?
    .on(backend)?;
    let got = x_buffer.read_f32(rows * width)?;
    let mut expected = x;
    if residual {
        for (t, a) in expected.iter_mut().zip(&added) {
            *t += *a;
        }
    }
    crate::bert::layer_norm_rows(crate::Kernels::best(), &mut expected, &gamma, &beta, eps);
    Ok(StepCheck {
        kernel: Kernel::LayerNorm.name(),
        case: format!("{rows} rows of {width}{}", if residual { " after a residual" } else { "" }),
        values: expected.len(),
        differing: count_differing(&got, &expected),
    })
}

/// Softmax of attention rows of several lengths and heads, after MPNet's relative-position bias when `bias`,
/// against `bert::softmax_rows` (and the CPU's own addition of the bias).
fn check_softmax(backend: &Arc<dyn Backend>, bias: bool) -> std::result::Result<StepCheck, DeviceError> {
    let heads = 3;
    let problems: Vec<(usize, usize)> =
        [1usize, 7, 16, 17, 40, 130].iter().enumerate().map(|(i, len)| (*len, i % heads)).collect();
    let mut offsets = Vec::with_capacity(problems.len());
    let mut elements = 0;
    for (len, _) in &problems {
        offsets.push(elements);
        elements += len * len;
    }
    // Scores of several units, with ties (the same value repeated) and both zeros among them.
    let mut scores: Vec<f32> = random(elements, 31).iter().map(|s| (s * 16.0).round() / 2.0).collect();
    for (i, score) in scores.iter_mut().enumerate().filter(|(i, _)| i % 11 == 0) {
        *score = if i % 2 == 0 { 0.0 } else { -0.0 };
    }
    let table_bias: Vec<f32> = random(32 * heads, 32).iter().map(|b| b * 4.0).collect();
    let mut table = Vec::new();
    for ((len, head), offset) in problems.iter().zip(&offsets) {
        table.extend(
            Fields::new()
                .i64(*offset as i64)
                .i32(*len as i32)
                .i32(*len as i32)
                .i32(*head as i32)
                .i32(0)
                .bytes(),
        );
    }
    let scores_buffer = Buffer::with_f32(backend, &scores)?;
    let table_buffer = Buffer::with_bytes(backend, &table)?;
    let bias_buffer = Buffer::with_f32(backend, &table_bias)?;
    let longest = problems.iter().map(|(len, _)| *len).max().unwrap_or(0);
    forward::softmax_rows(
        scores_buffer.address(),
        table_buffer.address(),
        if bias { bias_buffer.address() } else { 0 },
        heads,
        (problems.len(), longest),
    )?
    .on(backend)?;
    let got = scores_buffer.read_f32(elements)?;
    let mut expected = Vec::with_capacity(elements);
    for ((len, head), offset) in problems.iter().zip(&offsets) {
        let padded = len.next_multiple_of(16);
        let mut rows = vec![0.0f32; len * padded];
        for (query, row) in rows.chunks_exact_mut(padded).enumerate() {
            for (key, score) in row[..*len].iter_mut().enumerate() {
                *score = scores[offset + query * len + key];
                if bias {
                    *score +=
                        table_bias[crate::bert::relative_bucket(key as i64 - query as i64) * heads + head];
                }
            }
        }
        crate::bert::softmax_rows(crate::Kernels::best(), &mut rows, *len, padded);
        for row in rows.chunks_exact(padded) {
            expected.extend_from_slice(&row[..*len]);
        }
    }
    Ok(StepCheck {
        kernel: Kernel::SoftmaxRows.name(),
        case: format!(
            "{} rows of 1 to {longest} keys{}",
            problems.iter().map(|(len, _)| len).sum::<usize>(),
            if bias { ", MPNet's relative-position bias" } else { "" }
        ),
        values: expected.len(),
        differing: count_differing(&got, &expected),
    })
}

/// Pooling of sequences of 1 to 12 rows by `pooling`, against `bert::pool`. Some columns hold ties between
/// +0 and -0 (either order) and NaNs (first, last, everywhere), where the maximum's rule decides.
fn check_pool(backend: &Arc<dyn Backend>, pooling: Pooling) -> std::result::Result<StepCheck, DeviceError> {
    let hidden = 24;
    let sequences = [(0usize, 1usize), (1, 5), (6, 12), (18, 12)];
    let rows = 30;
    let mut x = random(rows * hidden, 41);
    for row in 0..rows {
        let at = |column: usize| row * hidden + column;
        x[at(0)] = if row % 2 == 0 { 0.0 } else { -0.0 };
        x[at(1)] = if row % 2 == 0 { -0.0 } else { 0.0 };
        x[at(2)] = if row % 6 == 1 || row % 6 == 0 { f32::NAN } else { x[at(2)] };
        x[at(3)] = if row % 6 == 5 || row == 29 { f32::NAN } else { x[at(3)] };
        x[at(4)] = f32::NAN;
        x[at(5)] = 0.25;
    }
    let Some(mode) = pooling.gpu_mode() else {
        return Err(DeviceError::Failed(format!("{} pooling is not run on the GPU", pooling.name())));
    };
    let mut table = Vec::new();
    for (first, count) in sequences {
        let count = if pooling == Pooling::Cls { 1 } else { count };
        table.extend(Fields::new().i64(first as i64).i32(count as i32).i32(0).bytes());
    }
    let x_buffer = Buffer::with_f32(backend, &x)?;
    let table_buffer = Buffer::with_bytes(backend, &table)?;
    let pooled = Buffer::new(backend, 4 * sequences.len() * hidden)?;
    forward::pool(
        x_buffer.address(),
        pooled.address(),
        table_buffer.address(),
        sequences.len(),
        hidden,
        mode,
    )?
    .on(backend)?;
    let got = pooled.read_f32(sequences.len() * hidden)?;
    let expected: Vec<f32> = sequences
        .iter()
        .flat_map(|(first, count)| {
            crate::bert::pool(&x[first * hidden..(first + count) * hidden], hidden, pooling, 0)
        })
        .collect();
    Ok(StepCheck {
        kernel: Kernel::Pool.name(),
        case: format!("{pooling:?} of {} sequences, with ±0 ties and NaNs", sequences.len()),
        values: expected.len(),
        differing: count_differing(&got, &expected),
    })
}

/// The L2 normalisation of vectors of several scales, against `identity::normalize`.
fn check_normalize(backend: &Arc<dyn Backend>) -> std::result::Result<StepCheck, DeviceError> {
    let (count, dims) = (9, 40);
    let scales = [1.0f32, 1e-3, 1e3, 1e-20, 1e20, 3.0, 0.5, 7.0, 1e-30];
    let vectors: Vec<f32> = random(count * dims, 51)
        .chunks_exact(dims)
        .zip(scales)
        .flat_map(|(v, scale)| v.iter().map(move |x| x * scale).collect::<Vec<_>>())
        .collect();
    let pooled = Buffer::with_f32(backend, &vectors)?;
    let normalized = Buffer::new(backend, 4 * count * dims)?;
    forward::normalize(pooled.address(), normalized.address(), count, dims)?.on(backend)?;
    let got = normalized.read_f32(count * dims)?;
    let mut expected = Vec::with_capacity(count * dims);
    for vector in vectors.chunks_exact(dims) {
        let mut vector = vector.to_vec();
        crate::identity::normalize(&mut vector).map_err(DeviceError::Failed)?;
        expected.extend(vector);
    }
    Ok(StepCheck {
        kernel: Kernel::Normalize.name(),
        case: format!("{count} vectors of {dims}, scales 1e-30 to 1e20"),
        values: expected.len(),
        differing: count_differing(&got, &expected),
    })
}

fn measure(
    backend: &Arc<dyn Backend>,
    kernel: Kernel,
    (m, n, k): (usize, usize, usize),
) -> std::result::Result<Throughput, DeviceError> {
    let a = Buffer::with_f32(backend, &random(m * k, 4))?;
    let w = Buffer::with_f32(backend, &random(n * k, 5))?;
    let bias = Buffer::with_f32(backend, &random(n, 6))?;
    let out = Buffer::new(backend, 4 * m * n)?;
    let table = Buffer::with_bytes(backend, &problem(0, 0, 0, (m, n, k), (k, n, n)))?;
    let launch = || {
        forward::product(
            kernel,
            [a.address(), w.address(), bias.address(), out.address()],
            table.address(),
            (m, n),
            false,
        )
    };
    launch()?.on(backend)?;
    let mut best = f64::INFINITY;
    for _ in 0..10 {
        let start = Instant::now();
        launch()?.on(backend)?;
        best = best.min(start.elapsed().as_secs_f64());
    }
    Ok(Throughput { kernel: kernel.name(), shape: [m, n, k], tflops: 2.0 * (m * n * k) as f64 / best / 1e12 })
}
