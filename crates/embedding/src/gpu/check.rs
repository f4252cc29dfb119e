//! A check of a device's kernels against the CPU's definitions, for a person with a GPU (`scifact-audit
//! device --check`) and for the GPU check script: the scalar functions (exp, erf, GELU) value by value over a
//! sweep of inputs, and products of ragged shapes element by element against the fma chain that defines them;
//! optionally the products' speed on MiniLM's shapes.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::backend::{Backend, Buffer, DeviceError, Fields, Kernel};
use super::forward::problem;
use super::{DeviceRequest, open};
use crate::error::{Error, Result};

/// What [`check_kernels`] found.
#[derive(Debug, Clone, Serialize)]
pub struct KernelCheck {
    /// The device, described.
    pub device: String,
    /// Inputs each scalar function was evaluated at.
    pub scalar_inputs: usize,
    /// Results (exp, erf and GELU of each input) whose bits differ from the CPU's.
    pub scalar_differing: usize,
    /// Each product shape tried, and how many of its elements differ from the fma chain.
    pub products: Vec<ProductCheck>,
    /// The products' speed on MiniLM's shapes, when asked for.
    pub throughput: Vec<Throughput>,
}

impl KernelCheck {
    /// True when every value had the CPU's bits.
    pub fn exact(&self) -> bool {
        self.scalar_differing == 0 && self.products.iter().all(|p| p.differing == 0)
    }
}

/// One product shape's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ProductCheck {
    /// The kernel.
    pub kernel: &'static str,
    /// Rows, columns and depth.
    pub shape: [usize; 3],
    /// Elements whose bits differ from the chain's.
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

/// The inputs the scalar functions are swept over: every 2^-12 step in [-100, 100], the edges of their clamps,
/// zeros, infinities, NaN, the smallest and largest magnitudes.
fn scalar_inputs() -> Vec<f32> {
    let mut inputs: Vec<f32> = (-409_600..=409_600).map(|i| i as f32 / 4096.0).collect();
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

/// Runs the check on the device `request` names (`cuda` or `emulated`; `auto` when it finds a GPU).
///
/// # Errors
/// [`Error::Device`] when there is no such device, or a launch fails.
pub fn check_kernels(request: DeviceRequest, throughput: bool) -> Result<KernelCheck> {
    let (opened, why_not) = open(request)?;
    let Some(opened) = opened else {
        return Err(Error::Device(match why_not {
            Some(reason) => format!("no GPU to check: {reason}"),
            None => "the CPU has no GPU kernels to check: ask for --device cuda or emulated".to_owned(),
        }));
    };
    check_on(opened.backend, opened.device.describe(), throughput)
}

/// [`check_kernels`] on `backend`, described as `device`.
pub(crate) fn check_on(backend: Arc<dyn Backend>, device: String, throughput: bool) -> Result<KernelCheck> {
    let (scalar_inputs, scalar_differing) = check_scalars(&backend).map_err(failed)?;
    let mut products = Vec::new();
    for kernel in WIDE {
        for (m, n, k) in [
            (1, 8, 3),
            (5, 40, 17),
            (13, 96, 32),
            (100, 33, 64),
            (129, 130, 131),
            (257, 384, 384),
            (64, 1536, 384),
        ] {
            products.push(check_product(&backend, kernel, (m, n, k)).map_err(failed)?);
        }
    }
    let mut speeds = Vec::new();
    if throughput {
        for kernel in WIDE {
            for (m, n, k) in [(49_152, 1536, 384), (49_152, 384, 1536), (49_152, 1152, 384)] {
                speeds.push(measure(&backend, kernel, (m, n, k)).map_err(failed)?);
            }
        }
    }
    Ok(KernelCheck { device, scalar_inputs, scalar_differing, products, throughput: speeds })
}

fn check_scalars(backend: &Arc<dyn Backend>) -> std::result::Result<(usize, usize), DeviceError> {
    let inputs = scalar_inputs();
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
        for (value, want) in got.iter().map(|g| g[i]).zip(expected) {
            if value.to_bits() != want.to_bits() {
                differing += 1;
            }
        }
    }
    Ok((count, differing))
}

/// The linear layers' products: one source, two register budgets.
const WIDE: [Kernel; 2] = [Kernel::GemmWide, Kernel::GemmWide2];

fn check_product(
    backend: &Arc<dyn Backend>,
    kernel: Kernel,
    (m, n, k): (usize, usize, usize),
) -> std::result::Result<ProductCheck, DeviceError> {
    let a = random(m * k, 1);
    let w = random(n * k, 2);
    let bias = random(n, 3);
    // The weight transposed, as the linear layers keep it: k rows of n.
    let mut transposed = vec![0.0f32; n * k];
    for (row, weights) in w.chunks_exact(k).enumerate() {
        for (column, value) in weights.iter().enumerate() {
            transposed[column * n + row] = *value;
        }
    }
    let a_buffer = Buffer::with_f32(backend, &a)?;
    let w_buffer = Buffer::with_f32(backend, &transposed)?;
    let bias_buffer = Buffer::with_f32(backend, &bias)?;
    let out = Buffer::new(backend, 4 * m * n)?;
    let table = Buffer::with_bytes(backend, &problem(0, 0, 0, (m, n, k), (k, n, n)))?;
    let arguments = Fields::new()
        .pointer(a_buffer.address())
        .pointer(w_buffer.address())
        .pointer(bias_buffer.address())
        .pointer(out.address())
        .pointer(table.address())
        .i32(0)
        .i32(0)
        .bytes();
    backend.launch(kernel, [n.div_ceil(128) as u32, m.div_ceil(128) as u32, 1], [256, 1, 1], &arguments)?;
    let got = out.read_f32(m * n)?;
    let mut differing = 0;
    for row in 0..m {
        for column in 0..n {
            let chain = a[row * k..(row + 1) * k]
                .iter()
                .zip(&w[column * k..(column + 1) * k])
                .fold(bias[column], |acc, (x, y)| x.mul_add(*y, acc));
            if chain.to_bits() != got[row * n + column].to_bits() {
                differing += 1;
            }
        }
    }
    Ok(ProductCheck { kernel: kernel.name(), shape: [m, n, k], differing })
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
    let arguments = Fields::new()
        .pointer(a.address())
        .pointer(w.address())
        .pointer(bias.address())
        .pointer(out.address())
        .pointer(table.address())
        .i32(0)
        .i32(0)
        .bytes();
    let grid = [n.div_ceil(128) as u32, m.div_ceil(128) as u32, 1];
    backend.launch(kernel, grid, [256, 1, 1], &arguments)?;
    let mut best = f64::INFINITY;
    for _ in 0..10 {
        let start = Instant::now();
        backend.launch(kernel, grid, [256, 1, 1], &arguments)?;
        best = best.min(start.elapsed().as_secs_f64());
    }
    Ok(Throughput { kernel: kernel.name(), shape: [m, n, k], tflops: 2.0 * (m * n * k) as f64 / best / 1e12 })
}
