//! The encoder's forward pass on a device ([`Backend`]), step for step the CPU's (`bert::Bert::pooled`): the
//! embeddings and their norm; per layer the query/key/value product, each sequence's attention per head (scores,
//! MPNet's bias, softmax, context), the output product with the residual and norm, the feed-forward product with
//! GELU, the down product with the residual and norm; then pooling and normalisation. The kernels keep the CPU's
//! order of operations, so that every vector is meant to be the CPU's bits, whatever the batch (held under the
//! emulator in CI; a GPU is taken only after its self-check, `check.rs`).

use std::sync::Arc;

use super::backend::{Backend, Buffer, DeviceError, Fields, Kernel};
use crate::bert::{Config, Linear, Norm, Weights};
use crate::checkpoint::Pooling;

/// The most texts one batch holds, however much memory there is: the work of a batch stays in the tens of
/// milliseconds, so progress is seen and an interruption costs little.
const MAX_TEXTS: usize = 2048;
/// The most problems (or rows of blocks) one launch takes: CUDA's limit on a grid's y and z.
const MAX_GRID: usize = 65_535;

struct DeviceLinear {
    /// The weight transposed: k rows of n.
    weight: Buffer,
    bias: Buffer,
    n: usize,
}

struct DeviceNorm {
    gamma: Buffer,
    beta: Buffer,
}

struct DeviceLayer {
    qkv: DeviceLinear,
    output: DeviceLinear,
    attention_norm: DeviceNorm,
    intermediate: DeviceLinear,
    down: DeviceLinear,
    output_norm: DeviceNorm,
}

/// The variable that picks the linear layers' product kernel (`wide`, the default, or `wide2`): the same
/// operations in the same order, one with a register budget for two blocks per multiprocessor. For measuring.
pub const GEMM_VAR: &str = "SCIFACT_AUDIT_GPU_GEMM";

/// The variable that, set, has the GPU forward pass time every kernel and print the totals when the model is
/// dropped: to see where a GPU's time goes.
pub const PROFILE_VAR: &str = "SCIFACT_AUDIT_GPU_PROFILE";

/// An encoder's weights on a device.
pub(crate) struct GpuModel {
    backend: Arc<dyn Backend>,
    /// The linear layers' product kernel ([`GEMM_VAR`]).
    wide: Kernel,
    /// Per kernel, its launches and their wall time, when [`PROFILE_VAR`] is set.
    profile: Option<std::sync::Mutex<Vec<(Kernel, usize, f64)>>>,
    config: Config,
    eps: f32,
    words: Buffer,
    positions: Buffer,
    token_type: Buffer,
    embedding_norm: DeviceNorm,
    layers: Vec<DeviceLayer>,
    relative_bias: Option<Buffer>,
}

/// What one batch gives back: each text's pooled vector, and its normalised one when asked for.
pub(crate) struct Pooled {
    pub(crate) pooled: Vec<Vec<f32>>,
    pub(crate) normalized: Option<Vec<Vec<f32>>>,
}

fn upload_linear(backend: &Arc<dyn Backend>, linear: &Linear) -> Result<DeviceLinear, DeviceError> {
    let (n, k) = (linear.n, linear.k);
    let mut transposed = vec![0.0f32; n * k];
    for (row, weights) in linear.weight.chunks_exact(k).enumerate() {
        for (column, w) in weights.iter().enumerate() {
            transposed[column * n + row] = *w;
        }
    }
    Ok(DeviceLinear {
        weight: Buffer::with_f32(backend, &transposed)?,
        bias: Buffer::with_f32(backend, &linear.bias)?,
        n,
    })
}

fn upload_norm(backend: &Arc<dyn Backend>, norm: &Norm) -> Result<DeviceNorm, DeviceError> {
    Ok(DeviceNorm {
        gamma: Buffer::with_f32(backend, &norm.gamma)?,
        beta: Buffer::with_f32(backend, &norm.beta)?,
    })
}

/// A whole number of blocks of `per` covering `count`, as a grid dimension.
fn blocks(count: usize, per: usize) -> Result<u32, DeviceError> {
    u32::try_from(count.div_ceil(per))
        .map_err(|_| DeviceError::Failed(format!("{count} is too many for one launch")))
}

/// The activations of one batch.
struct Activations {
    tokens: usize,
    x: Buffer,
    qkv: Buffer,
    context: Buffer,
    projected: Buffer,
    intermediate: Buffer,
    scores: Buffer,
    tables: Buffer,
}

/// One batch's shape: where each sequence's rows and each head's scores are, and the launch tables.
struct Plan {
    lengths: Vec<usize>,
    tokens: usize,
    /// Elements of the score buffer.
    score_elements: usize,
    /// The byte tables uploaded once per batch, and where each starts (bytes).
    tables: Vec<u8>,
    linear_at: [usize; 4],
    scores_at: usize,
    context_at: usize,
    softmax_at: usize,
    pool_at: usize,
    problems: usize,
}

/// Each linear layer's shape as (n, k), in the order of `Plan::linear_at`: qkv, output, intermediate, down.
fn linear_shapes(config: &Config) -> [(usize, usize); 4] {
    let (h, i) = (config.hidden_size, config.intermediate_size);
    [(3 * h, h), (h, h), (i, h), (h, i)]
}

impl GpuModel {
    /// Uploads `weights` to `backend`.
    pub(crate) fn upload(backend: Arc<dyn Backend>, weights: &Weights) -> Result<GpuModel, DeviceError> {
        let b = &backend;
        let mut layers = Vec::with_capacity(weights.layers.len());
        for layer in &weights.layers {
            layers.push(DeviceLayer {
                qkv: upload_linear(b, &layer.qkv)?,
                output: upload_linear(b, &layer.output)?,
                attention_norm: match &layer.attention_norm {
                    Some(norm) => upload_norm(b, norm)?,
                    None => {
                        return Err(DeviceError::Failed(
                            "a pre-norm block (no attention norm) is not run here".into(),
                        ));
                    }
                },
                intermediate: upload_linear(b, &layer.intermediate)?,
                down: upload_linear(b, &layer.down)?,
                output_norm: upload_norm(b, &layer.output_norm)?,
            });
        }
        Ok(GpuModel {
            words: Buffer::with_f32(b, &weights.words)?,
            positions: Buffer::with_f32(b, &weights.positions)?,
            token_type: Buffer::with_f32(b, &weights.token_type)?,
            embedding_norm: match &weights.embedding_norm {
                Some(norm) => upload_norm(b, norm)?,
                None => {
                    return Err(DeviceError::Failed("a decoder (no embedding norm) is not run here".into()));
                }
            },
            relative_bias: if weights.relative_bias.is_empty() {
                None
            } else {
                Some(Buffer::with_f32(b, &weights.relative_bias)?)
            },
            layers,
            config: weights.config.clone(),
            eps: weights.eps,
            backend,
            wide: match std::env::var(GEMM_VAR).as_deref() {
                Ok("wide2") => Kernel::GemmWide2,
                _ => Kernel::GemmWide,
            },
            profile: std::env::var_os(PROFILE_VAR).map(|_| std::sync::Mutex::new(Vec::new())),
        })
    }

    /// The device memory a batch of sequences of `lengths` takes, in bytes (activations, scores and tables).
    pub(crate) fn batch_bytes(&self, lengths: &[usize]) -> usize {
        let (h, i, heads) =
            (self.config.hidden_size, self.config.intermediate_size, self.config.num_attention_heads);
        let tokens: usize = lengths.iter().sum();
        let squares: usize = lengths.iter().map(|l| l * l).sum();
        let problems = lengths.len() * heads;
        4 * tokens * (7 * h + i) // x, qkv, context, projected, intermediate
            + 8 * tokens // ids, positions
            + 4 * heads * squares
            + 2 * 48 * problems + 24 * problems + 16 * lengths.len() + 4 * 48
            + 8 * lengths.len() * h // pooled, normalised
    }

    /// How many texts of `lengths` (the batch's order) the next batch takes within `budget` bytes: at least one.
    pub(crate) fn batch_within(&self, lengths: &[usize], budget: usize) -> usize {
        let mut take = 1;
        while take < lengths.len() && take < MAX_TEXTS && self.batch_bytes(&lengths[..=take]) <= budget {
            take += 1;
        }
        take
    }

    /// The device memory free now.
    pub(crate) fn free_memory(&self) -> Result<usize, DeviceError> {
        self.backend.free_memory()
    }

    fn plan(&self, batch: &[&[u32]], pooling: Pooling, skip: usize) -> Plan {
        let (h, heads) = (self.config.hidden_size, self.config.num_attention_heads);
        let head_dim = h / heads;
        let lengths: Vec<usize> = batch.iter().map(|ids| ids.len()).collect();
        let mut starts = Vec::with_capacity(lengths.len());
        let mut tokens = 0;
        for len in &lengths {
            starts.push(tokens);
            tokens += len;
        }
        let mut tables = Vec::new();
        let mut linear_at = [0; 4];
        for (at, (n, k)) in linear_at.iter_mut().zip(linear_shapes(&self.config)) {
            *at = tables.len();
            tables.extend(problem(0, 0, 0, (tokens, n, k), (k, n, n)));
        }
        // Scores: for each sequence and head, len × len, with the head's queries and keys read in place.
        let mut score_offsets = Vec::with_capacity(lengths.len() * heads);
        let mut score_elements = 0;
        for len in &lengths {
            for _ in 0..heads {
                score_offsets.push(score_elements);
                score_elements += len * len;
            }
        }
        let scores_at = tables.len();
        let context_at_rows: Vec<(usize, usize, usize, usize)> = lengths
            .iter()
            .zip(&starts)
            .flat_map(|(len, start)| (0..heads).map(move |head| (*len, *start, head, 0)))
            .collect();
        for (index, (len, start, head, _)) in context_at_rows.iter().enumerate() {
            let row = start * 3 * h;
            tables.extend(problem(
                row + head * head_dim,
                row + h + head * head_dim,
                score_offsets[index],
                (*len, *len, head_dim),
                (3 * h, 3 * h, *len),
            ));
        }
        let context_at = tables.len();
        for (index, (len, start, head, _)) in context_at_rows.iter().enumerate() {
            tables.extend(problem(
                score_offsets[index],
                start * 3 * h + 2 * h + head * head_dim,
                start * h + head * head_dim,
                (*len, head_dim, *len),
                (*len, 3 * h, h),
            ));
        }
        let softmax_at = tables.len();
        for (index, (len, _, head, _)) in context_at_rows.iter().enumerate() {
            tables.extend(
                Fields::new()
                    .i64(score_offsets[index] as i64)
                    .i32(*len as i32)
                    .i32(*len as i32)
                    .i32(*head as i32)
                    .i32(0)
                    .bytes(),
            );
        }
        let pool_at = tables.len();
        for (len, start) in lengths.iter().zip(&starts) {
            // The rows after a prompt's `skip`, or all of them when that would leave none (mod.rs's pool).
            let (first, count) = if skip < *len { (start + skip, len - skip) } else { (*start, *len) };
            let count = if pooling == Pooling::Cls { 1 } else { count };
            tables.extend(Fields::new().i64(first as i64).i32(count as i32).i32(0).bytes());
        }
        Plan {
            problems: context_at_rows.len(),
            lengths,
            tokens,
            score_elements,
            tables,
            linear_at,
            scores_at,
            context_at,
            softmax_at,
            pool_at,
        }
    }

    /// The pooled vectors of `batch` (token ids, already checked against the tables), normalised too when
    /// `normalized_too`.
    pub(crate) fn pooled(
        &self,
        batch: &[&[u32]],
        pooling: Pooling,
        skip: usize,
        normalized_too: bool,
    ) -> Result<Pooled, DeviceError> {
        let b = &self.backend;
        let (h, i) = (self.config.hidden_size, self.config.intermediate_size);
        let plan = self.plan(batch, pooling, skip);
        let ids: Vec<u32> = batch.iter().flat_map(|ids| ids.iter().copied()).collect();
        let places: Vec<u32> =
            batch.iter().flat_map(|ids| self.config.positions(ids)).map(|p| p as u32).collect();
        let tokens = plan.tokens;
        let ids = Buffer::with_u32(b, &ids)?;
        let places = Buffer::with_u32(b, &places)?;
        let work = Activations {
            tokens,
            x: Buffer::new(b, 4 * tokens * h)?,
            qkv: Buffer::new(b, 12 * tokens * h)?,
            context: Buffer::new(b, 4 * tokens * h)?,
            projected: Buffer::new(b, 4 * tokens * h)?,
            intermediate: Buffer::new(b, 4 * tokens * i)?,
            scores: Buffer::new(b, 4 * plan.score_elements)?,
            tables: Buffer::with_bytes(b, &plan.tables)?,
        };

        self.run(embed_tokens(
            [ids.address(), places.address()],
            [self.words.address(), self.positions.address(), self.token_type.address()],
            work.x.address(),
            tokens,
            h,
        )?)?;
        self.norm(&work.x, None, &self.embedding_norm, tokens)?;

        for layer in &self.layers {
            self.linear(&work, plan.linear_at[0], &work.x, &layer.qkv, &work.qkv, false)?;
            self.attention(&work, &plan)?;
            self.linear(&work, plan.linear_at[1], &work.context, &layer.output, &work.projected, false)?;
            self.norm(&work.projected, Some(&work.x), &layer.attention_norm, tokens)?;
            self.linear(
                &work,
                plan.linear_at[2],
                &work.projected,
                &layer.intermediate,
                &work.intermediate,
                true,
            )?;
            self.linear(&work, plan.linear_at[3], &work.intermediate, &layer.down, &work.x, false)?;
            self.norm(&work.x, Some(&work.projected), &layer.output_norm, tokens)?;
        }

        let count = plan.lengths.len();
        let pooled = Buffer::new(b, 4 * count * h)?;
        let Some(mode) = pooling.gpu_mode() else {
            return Err(DeviceError::Failed(format!("{} pooling is not run on the GPU", pooling.name())));
        };
        self.run(pool(
            work.x.address(),
            pooled.address(),
            work.tables.address() + plan.pool_at as u64,
            count,
            h,
            mode,
        )?)?;
        let vectors = |buffer: &Buffer| -> Result<Vec<Vec<f32>>, DeviceError> {
            Ok(buffer.read_f32(count * h)?.chunks_exact(h).map(<[f32]>::to_vec).collect())
        };
        let normalized = if normalized_too {
            let normalized = Buffer::new(b, 4 * count * h)?;
            self.run(normalize(pooled.address(), normalized.address(), count, h)?)?;
            Some(vectors(&normalized)?)
        } else {
            None
        };
        Ok(Pooled { pooled: vectors(&pooled)?, normalized })
    }

    /// Runs `launch`, timing it when profiling.
    fn run(&self, launch: Launch) -> Result<(), DeviceError> {
        let Launch { kernel, grid, block, arguments } = launch;
        let Some(profile) = &self.profile else {
            return self.backend.launch(kernel, grid, block, &arguments);
        };
        let start = std::time::Instant::now();
        self.backend.launch(kernel, grid, block, &arguments)?;
        let seconds = start.elapsed().as_secs_f64();
        if let Ok(mut profile) = profile.lock() {
            match profile.iter_mut().find(|(k, _, _)| *k == kernel) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 += seconds;
                }
                None => profile.push((kernel, 1, seconds)),
            }
        }
        Ok(())
    }

    /// `out = input · weightᵀ + bias` (then GELU when `gelu`) over every token row.
    fn linear(
        &self,
        work: &Activations,
        table: usize,
        input: &Buffer,
        linear: &DeviceLinear,
        out: &Buffer,
        gelu: bool,
    ) -> Result<(), DeviceError> {
        let table = work.tables.address() + table as u64;
        self.run(product(
            self.wide,
            [input.address(), linear.weight.address(), linear.bias.address(), out.address()],
            table,
            (work.tokens, linear.n),
            gelu,
        )?)
    }

    /// Every sequence's attention, every head: scores, MPNet's bias and softmax, context.
    fn attention(&self, work: &Activations, plan: &Plan) -> Result<(), DeviceError> {
        let heads = self.config.num_attention_heads;
        let head_dim = self.config.hidden_size / heads;
        let longest = plan.lengths.iter().copied().max().unwrap_or(0);
        for first in (0..plan.problems).step_by(MAX_GRID) {
            let count = (plan.problems - first).min(MAX_GRID);
            let longest_here = plan.lengths[first / heads..(first + count).div_ceil(heads)]
                .iter()
                .copied()
                .max()
                .unwrap_or(longest);
            let tables = work.tables.address();
            let qkv = work.qkv.address();
            self.run(
                product(
                    Kernel::GemmScores,
                    [qkv, qkv, 0, work.scores.address()],
                    tables + (plan.scores_at + 48 * first) as u64,
                    (longest_here, longest_here),
                    false,
                )?
                .for_problems(count)?,
            )?;
            let bias = self.relative_bias.as_ref().map_or(0, Buffer::address);
            self.run(softmax_rows(
                work.scores.address(),
                tables + (plan.softmax_at + 24 * first) as u64,
                bias,
                heads,
                (count, longest_here),
            )?)?;
            self.run(
                product(
                    Kernel::GemmContext,
                    [work.scores.address(), qkv, 0, work.context.address()],
                    tables + (plan.context_at + 48 * first) as u64,
                    (longest_here, head_dim),
                    false,
                )?
                .for_problems(count)?,
            )?;
        }
        Ok(())
    }

    /// Layer norm of `rows` rows of `x`, after adding `residual`'s rows when given.
    fn norm(
        &self,
        x: &Buffer,
        residual: Option<&Buffer>,
        norm: &DeviceNorm,
        rows: usize,
    ) -> Result<(), DeviceError> {
        self.run(layer_norm(
            x.address(),
            residual.map_or(0, Buffer::address),
            [norm.gamma.address(), norm.beta.address()],
            (rows, self.config.hidden_size),
            self.eps,
        )?)
    }
}

/// One kernel launch: the kernel, its grid and block, and its argument struct's bytes. The forward pass and
/// the kernel check (`check.rs`) build every launch with the functions below, so both run the kernels as one.
pub(crate) struct Launch {
    pub(crate) kernel: Kernel,
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) arguments: Vec<u8>,
}

impl Launch {
    /// The launch over `count` problems of its table (grid z), for the attention products.
    pub(crate) fn for_problems(mut self, count: usize) -> Result<Launch, DeviceError> {
        if count > MAX_GRID {
            return Err(DeviceError::Failed(format!("{count} problems are too many for one launch")));
        }
        self.grid[2] = count as u32;
        Ok(self)
    }

    /// Runs it on `backend`.
    pub(crate) fn on(self, backend: &Arc<dyn Backend>) -> Result<(), DeviceError> {
        backend.launch(self.kernel, self.grid, self.block, &self.arguments)
    }
}

/// `x = (word + position) + token type` for `tokens` rows of `hidden`: `[ids, positions]` (u32 each),
/// `[words, position table, token type]`.
pub(crate) fn embed_tokens(
    [ids, places]: [u64; 2],
    [words, positions, token_type]: [u64; 3],
    x: u64,
    tokens: usize,
    hidden: usize,
) -> Result<Launch, DeviceError> {
    let elements = tokens * hidden;
    let arguments = Fields::new()
        .pointer(ids)
        .pointer(places)
        .pointer(words)
        .pointer(positions)
        .pointer(token_type)
        .pointer(x)
        .i64(elements as i64)
        .i32(hidden as i32)
        .i32(0)
        .bytes();
    Ok(Launch {
        kernel: Kernel::EmbedTokens,
        grid: [blocks(elements, 256)?, 1, 1],
        block: [256, 1, 1],
        arguments,
    })
}

/// Layer norm of `rows` rows of `width` at `x`, in place, after adding `residual`'s rows (0: none).
pub(crate) fn layer_norm(
    x: u64,
    residual: u64,
    [gamma, beta]: [u64; 2],
    (rows, width): (usize, usize),
    eps: f32,
) -> Result<Launch, DeviceError> {
    let arguments = Fields::new()
        .pointer(x)
        .pointer(residual)
        .pointer(gamma)
        .pointer(beta)
        .i64(rows as i64)
        .i32(width as i32)
        .f32(eps)
        .bytes();
    Ok(Launch { kernel: Kernel::LayerNorm, grid: [blocks(rows, 8)?, 1, 1], block: [16, 8, 1], arguments })
}

/// A product kernel over the first problem of `table` (`Launch::for_problems` for more), its output at most
/// `rows` by `columns`: `[a, b, bias (0: none), c]`, GELU after when `gelu`.
pub(crate) fn product(
    kernel: Kernel,
    [a, b, bias, c]: [u64; 4],
    table: u64,
    (rows, columns): (usize, usize),
    gelu: bool,
) -> Result<Launch, DeviceError> {
    let (tile_rows, tile_columns, threads) = match kernel {
        Kernel::GemmScores => (64, 64, 256),
        Kernel::GemmContext => (64, 32, 128),
        _ => (128, 128, 256),
    };
    let grid = [blocks(columns, tile_columns)?, blocks(rows, tile_rows)?, 1];
    if grid[1] as usize > MAX_GRID {
        return Err(DeviceError::Failed(format!("{rows} rows are too many for one launch")));
    }
    let arguments = Fields::new()
        .pointer(a)
        .pointer(b)
        .pointer(bias)
        .pointer(c)
        .pointer(table)
        .i32(i32::from(gelu))
        .i32(0)
        .bytes();
    Ok(Launch { kernel, grid, block: [threads, 1, 1], arguments })
}

/// Softmax of the score rows of `count` problems of `table` (the longest `longest` rows), after MPNet's
/// relative-position `bias` (0: none) of `heads` heads.
pub(crate) fn softmax_rows(
    scores: u64,
    table: u64,
    bias: u64,
    heads: usize,
    (count, longest): (usize, usize),
) -> Result<Launch, DeviceError> {
    if count > MAX_GRID {
        return Err(DeviceError::Failed(format!("{count} problems are too many for one launch")));
    }
    let arguments =
        Fields::new().pointer(scores).pointer(table).pointer(bias).i32(heads as i32).i32(0).bytes();
    Ok(Launch {
        kernel: Kernel::SoftmaxRows,
        grid: [blocks(longest, 8)?, count as u32, 1],
        block: [16, 8, 1],
        arguments,
    })
}

/// Pooling of `count` sequences (`table`: each one's first row and row count) of `x`'s rows of `hidden`:
/// `mode` 0 the first row, 1 the mean, 2 the maximum.
pub(crate) fn pool(
    x: u64,
    pooled: u64,
    table: u64,
    count: usize,
    hidden: usize,
    mode: i32,
) -> Result<Launch, DeviceError> {
    let arguments = Fields::new()
        .pointer(x)
        .pointer(pooled)
        .pointer(table)
        .i32(count as i32)
        .i32(hidden as i32)
        .i32(mode)
        .i32(0)
        .bytes();
    Ok(Launch { kernel: Kernel::Pool, grid: [blocks(count, 1)?, 1, 1], block: [128, 1, 1], arguments })
}

/// The L2 normalisation of `count` vectors of `dims`.
pub(crate) fn normalize(
    pooled: u64,
    normalized: u64,
    count: usize,
    dims: usize,
) -> Result<Launch, DeviceError> {
    let arguments =
        Fields::new().pointer(pooled).pointer(normalized).i32(count as i32).i32(dims as i32).bytes();
    Ok(Launch { kernel: Kernel::Normalize, grid: [blocks(count, 128)?, 1, 1], block: [128, 1, 1], arguments })
}

/// A product's table row: offsets of a, b and c (elements), its (m, n, k) and its (lda, ldb, ldc).
pub(crate) fn problem(
    a: usize,
    b: usize,
    c: usize,
    (m, n, k): (usize, usize, usize),
    (lda, ldb, ldc): (usize, usize, usize),
) -> Vec<u8> {
    Fields::new()
        .i64(a as i64)
        .i64(b as i64)
        .i64(c as i64)
        .i32(m as i32)
        .i32(n as i32)
        .i32(k as i32)
        .i32(lda as i32)
        .i32(ldb as i32)
        .i32(ldc as i32)
        .bytes()
}

impl Drop for GpuModel {
    fn drop(&mut self) {
        let Some(profile) = self.profile.as_ref().and_then(|p| p.lock().ok()) else { return };
        let total: f64 = profile.iter().map(|(_, _, s)| s).sum();
        #[allow(clippy::print_stderr)]
        for (kernel, launches, seconds) in profile.iter() {
            eprintln!(
                "{PROFILE_VAR}: {:<13} {launches:>7} launches {seconds:>9.3} s {:>5.1} %",
                kernel.name(),
                100.0 * seconds / total.max(1e-12)
            );
        }
    }
}
