//! The GPU kernels held to the CPU path without a GPU: kernels.cu compiled as host C++ and run under the launch
//! emulator, through the same forward pass a CUDA device runs, must give every vector's bits, for every parity
//! checkpoint and for ragged shapes; and the same source with its products' k order reversed must not.

use std::path::PathBuf;
use std::sync::Arc;

use super::emulator::{Emulator, Variant};
use super::{Backend, Device, DeviceRequest, GpuModel};
use crate::testing::{BertShape, Encoder, PARITY_TEXTS, parity_checkpoints, write_sentence_transformers};
use crate::{Embedder, Role, SentenceBert, WeightPin};

fn checkpoints_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/checkpoints")
}

impl SentenceBert {
    /// Runs the forward pass on an emulator of `variant` with `capacity` bytes of memory, which reports
    /// `reported` bytes free (more than it has, to make a batch run out of memory mid-run).
    fn use_emulator(&mut self, variant: Variant, capacity: usize, reported: Option<usize>) -> Arc<Emulator> {
        let emulator = Arc::new(Emulator::new(variant, capacity).reporting(reported));
        let backend: Arc<dyn Backend> = Arc::clone(&emulator) as Arc<dyn Backend>;
        let weights = crate::bert::Weights::read(self.checkpoint.config.clone(), &self.weights).unwrap();
        let model = GpuModel::upload(backend, &weights).unwrap();
        self.gpu = Some(super::super::sentence_bert::Gpu::new(model, Device::Emulated));
        emulator
    }
}

/// Every text in both roles, with the prompt the checkpoint declares for each: each vector's bits.
fn vectors(model: &SentenceBert, texts: &[&str]) -> Vec<Vec<u32>> {
    [Role::Query, Role::Document]
        .into_iter()
        .flat_map(|role| model.embed_prompted(model.declared_prompt(role).as_str(), texts, &|_| {}).unwrap())
        .map(|embedding| embedding.vector.iter().map(|x| x.to_bits()).collect())
        .collect()
}

fn load(dir: &std::path::Path, name: &str) -> SentenceBert {
    SentenceBert::load(dir, name, WeightPin::Unpinned).unwrap()
}

#[test]
fn the_emulated_kernels_give_the_cpus_bits_for_every_parity_checkpoint() {
    let mut compared = 0;
    for (name, _, _, _) in parity_checkpoints() {
        let mut model = load(&checkpoints_dir().join(name), name);
        let cpu = vectors(&model, &PARITY_TEXTS);
        let choice = model.use_device(DeviceRequest::Emulated).unwrap();
        assert_eq!(choice.device, Device::Emulated);
        assert_eq!(
            vectors(&model, &PARITY_TEXTS),
            cpu,
            "{name}: the emulated GPU kernels differ from the CPU"
        );
        compared += cpu.len();
    }
    assert_eq!(compared, parity_checkpoints().len() * 2 * PARITY_TEXTS.len());
}

/// Each parity checkpoint's declarations on a ragged shape: hidden 40 in 5 heads of 8 (no width a multiple of the
/// tiles), a feed-forward of 72, and texts from 1 to about 280 tokens, so that products end inside tiles of
/// every kernel and attention rows run past 256 keys (MPNet's buckets to their far end).
fn ragged() -> Vec<(String, BertShape, u64, crate::testing::SentenceLayout)> {
    parity_checkpoints()
        .into_iter()
        .map(|(name, mut shape, seed, mut layout)| {
            shape.hidden = 40;
            shape.heads = 5;
            shape.intermediate = 72;
            shape.max_positions = 300;
            layout.max_seq_length = 290;
            for key in ["word_embedding_dimension", "embedding_dimension"] {
                if let Some(dimension) = layout.pooling.get_mut(key) {
                    *dimension = serde_json::Value::from(40);
                }
            }
            (format!("{name} (ragged)"), shape, seed + 1, layout)
        })
        .collect()
}

/// Texts of `words` drawn in a fixed order, of lengths from 0 to about 280 words.
fn ragged_texts(words: &[String]) -> Vec<String> {
    let lengths = [0usize, 1, 7, 16, 17, 33, 64, 65, 129, 255, 280];
    lengths
        .iter()
        .enumerate()
        .map(|(t, n)| {
            (0..*n).map(|i| words[(i * 7 + t * 3) % words.len()].as_str()).collect::<Vec<_>>().join(" ")
        })
        .collect()
}

#[test]
fn the_emulated_kernels_give_the_cpus_bits_on_ragged_shapes_of_every_encoder() {
    let mut encoders = Vec::new();
    for (name, shape, seed, layout) in ragged() {
        let dir = tempfile::tempdir().unwrap();
        write_sentence_transformers(dir.path(), &shape, seed, &layout).unwrap();
        let texts = ragged_texts(&shape.words);
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut model = load(dir.path(), &name);
        // One role: the shapes are what is tried here (the parity checkpoints try both roles' prompts).
        let embed = |model: &SentenceBert| -> Vec<Vec<u32>> {
            let prompt = model.declared_prompt(Role::Query);
            let embedded = model.embed_prompted(prompt.as_str(), &texts, &|_| {}).unwrap();
            embedded.into_iter().map(|e| e.vector.iter().map(|x| x.to_bits()).collect()).collect()
        };
        let cpu = embed(&model);
        model.use_device(DeviceRequest::Emulated).unwrap();
        assert_eq!(embed(&model), cpu, "{name}: the emulated GPU kernels differ from the CPU");
        encoders.push(shape.encoder);
    }
    for encoder in [Encoder::Bert, Encoder::XlmRoberta, Encoder::Mpnet, Encoder::BertSentencePiece] {
        assert!(encoders.contains(&encoder), "{encoder:?} was not tried");
    }
}

/// The test above, its kernels' k order reversed: it must fail, or it could not catch a reordered kernel.
#[test]
fn a_kernel_that_takes_k_in_another_order_gives_other_bits() {
    let mut caught = Vec::new();
    for (name, _, _, _) in parity_checkpoints() {
        let mut model = load(&checkpoints_dir().join(name), name);
        let cpu = vectors(&model, &PARITY_TEXTS);
        let _ = model.use_emulator(Variant::Broken, super::emulator::DEFAULT_CAPACITY, None);
        let broken = vectors(&model, &PARITY_TEXTS);
        let differing = cpu.iter().zip(&broken).filter(|(a, b)| a != b).count();
        caught.push((name, differing));
    }
    assert!(
        caught.iter().all(|(_, differing)| *differing > 0),
        "the reordered kernels went unnoticed for some checkpoint: {caught:?}"
    );
    for extent in [super::Extent::Full, super::Extent::SelfCheck] {
        let broken = super::check::check_on(
            Arc::new(Emulator::new(Variant::Broken, super::emulator::DEFAULT_CAPACITY)),
            "broken".into(),
            extent,
            false,
        )
        .unwrap();
        assert!(!broken.exact(), "the kernel check ({extent:?}) passed reordered kernels: {broken:?}");
        assert!(broken.differences().contains("gemm_wide"), "{}", broken.differences());
    }
}

#[test]
fn the_emulated_kernels_pass_the_kernel_check_of_every_kernel() {
    let check = super::check_kernels(DeviceRequest::Emulated, super::Extent::Full, false).unwrap();
    assert!(check.scalar_inputs > 800_000, "{}", check.scalar_inputs);
    assert!(check.exact(), "{}", check.differences());
    assert_eq!(check.differences(), "");
    assert!(check.products.iter().any(|p| p.shape == [129, 130, 131]));
    let mut every: Vec<&str> = super::backend::Kernel::ALL.iter().map(|k| k.name()).collect();
    every.sort_unstable();
    assert_eq!(check.kernels(), every, "a kernel the check does not run");
    for (kernel, gelu) in
        [("gemm_wide", true), ("gemm_wide2", true), ("gemm_scores", false), ("gemm_context", false)]
    {
        assert!(check.products.iter().any(|p| p.kernel == kernel && p.gelu == gelu), "{kernel}");
    }
    for case in ["Max", "Mean", "Cls", "relative-position bias", "after a residual"] {
        assert!(check.steps.iter().any(|s| s.case.contains(case)), "no case {case}");
    }
}

/// A GPU's NaN is canonical (0x7fffffff) where x86 keeps an operand's (0x7fc00000): the check takes any NaN for
/// any NaN, and every other value by its bits (+0 is not -0).
#[test]
fn the_check_compares_nan_as_nan_and_zeros_by_sign() {
    use super::check::same;
    assert!(same(f32::from_bits(0x7fff_ffff), f32::from_bits(0x7fc0_0000)));
    assert!(same(f32::from_bits(0xffc0_0000), f32::NAN));
    assert!(!same(0.0, -0.0));
    assert!(!same(f32::NAN, 1.0));
    assert!(!same(1.0, 1.0 + f32::EPSILON));
    assert!(same(-0.0, -0.0));
}

/// `auto` and `cuda` take a device only once its kernels pass the self-check: the exact emulator passes, the one
/// whose products take k in reverse is refused, naming what differed.
#[test]
fn a_device_that_fails_its_self_check_is_refused() {
    let opened = |variant| super::Opened {
        backend: Arc::new(Emulator::new(variant, super::emulator::DEFAULT_CAPACITY)),
        device: Device::Emulated,
    };
    assert!(super::vet(opened(Variant::Exact)).is_ok());
    let Err(why) = super::vet(opened(Variant::Broken)) else {
        panic!("a broken device passed its self-check")
    };
    assert!(why.contains("failed its self-check against the CPU") && why.contains("gemm_wide"), "{why}");
    let check = super::check::check_on(
        opened(Variant::Exact).backend,
        "exact".into(),
        super::Extent::SelfCheck,
        false,
    )
    .unwrap();
    let mut every: Vec<&str> = super::backend::Kernel::ALL.iter().map(|k| k.name()).collect();
    every.sort_unstable();
    assert_eq!(check.kernels(), every, "the self-check leaves a kernel out");
    assert!(check.scalar_inputs < 30_000, "the self-check is meant to take seconds: {}", check.scalar_inputs);
}

/// A GPU with little memory embeds in smaller batches, and one that runs out mid-run halves its batch: the
/// same bits either way; a text that cannot fit at all is an error that says so.
#[test]
fn small_or_exhausted_gpu_memory_changes_batches_never_bits() {
    let (name, shape, seed, layout) = ragged().remove(1);
    let dir = tempfile::tempdir().unwrap();
    write_sentence_transformers(dir.path(), &shape, seed, &layout).unwrap();
    let texts = ragged_texts(&shape.words);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut model = load(dir.path(), &name);
    let cpu = vectors(&model, &texts);
    // The device memory the weights take: the capacities below are that and a little more.
    let weights = {
        let backend: Arc<dyn Backend> = Arc::new(Emulator::new(Variant::Exact, 1 << 30));
        let read = crate::bert::Weights::read(model.checkpoint.config.clone(), &model.weights).unwrap();
        let _model = GpuModel::upload(Arc::clone(&backend), &read).unwrap();
        (1 << 30) - backend.free_memory().unwrap()
    };
    let batches = std::sync::atomic::AtomicUsize::new(0);
    let _ = model.use_emulator(Variant::Exact, weights + 4_000_000, None);
    let small: Vec<Vec<u32>> = model
        .embed_prompted("", &texts, &|_| {
            batches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap()
        .into_iter()
        .map(|e| e.vector.iter().map(|x| x.to_bits()).collect())
        .collect();
    assert!(batches.into_inner() > 1, "a small memory must split the texts into batches");
    model.gpu = None;
    let cpu_one_role: Vec<Vec<u32>> = model
        .embed_prompted("", &texts, &|_| {})
        .unwrap()
        .into_iter()
        .map(|e| e.vector.iter().map(|x| x.to_bits()).collect())
        .collect();
    assert_eq!(small, cpu_one_role);

    // Reports ten times the memory it has: the first batch runs out of memory and is halved until it fits.
    let overstating =
        model.use_emulator(Variant::Exact, weights + 4_000_000, Some(10 * (weights + 4_000_000)));
    assert_eq!(vectors(&model, &texts), cpu);
    assert!(overstating.refused.load(std::sync::atomic::Ordering::SeqCst) > 0, "no batch ran out of memory");

    // Room for the weights and little else: the longest text alone does not fit.
    let _ = model.use_emulator(Variant::Exact, weights + 20_000, None);
    let error = model.embed_prompted("", &texts, &|_| {}).unwrap_err().to_string();
    assert!(error.contains("out of memory for one text of 290 tokens"), "{error}");
}

/// Without a GPU, `cuda` is an error naming what is missing and `auto` runs on the CPU saying why; with one,
/// both run on it.
#[test]
fn cuda_without_a_gpu_is_an_error_naming_what_is_missing_and_auto_falls_back() {
    let name = "mean-two-prompts";
    let mut model = load(&checkpoints_dir().join(name), name);
    let auto = model.use_device(DeviceRequest::Auto).unwrap();
    match model.use_device(DeviceRequest::Cuda) {
        Ok(choice) => {
            assert_eq!(choice.device.kind(), "cuda");
            assert_eq!(auto.device.kind(), "cuda");
        }
        Err(error) => {
            let error = error.to_string();
            assert!(
                ["no NVIDIA driver", "sees no GPU", "did not start", "NVRTC"]
                    .iter()
                    .any(|what| error.contains(what)),
                "{error}"
            );
            assert_eq!(auto.device.kind(), "cpu");
            assert!(auto.no_gpu.is_some_and(|why| !why.is_empty()));
            // The model still embeds, on the CPU.
            assert_eq!(model.device().kind(), "cpu");
            assert_eq!(model.embed(&["risk"]).unwrap().len(), 1);
        }
    }
}

/// The kernels compile with NVRTC as the CUDA backend compiles them (for Hopper, the GPU the check script runs
/// on, and for the oldest architecture CUDA 13 builds), and the PTX holds no operation that rounds otherwise
/// than IEEE says: every float add, multiply, divide and square root `.rn`, no approximation, no flush to zero.
/// And the source leaves the compiler nothing to fuse: compiled with `--fmad=true` (contraction allowed) it gives
/// the same PTX as with `--fmad=false`, so every `fma.rn.f32` is one of the source's own `__fmaf_rn`, and a plain
/// `a * b + c` slipped into it would fail here (shown on a one-line kernel that has one).
#[test]
#[ignore = "needs SCIFACT_AUDIT_NVRTC (libnvrtc.so of CUDA 12 or 13; CI installs the nvidia-cuda-nvrtc wheel)"]
#[allow(clippy::print_stderr)]
fn the_kernels_compile_with_nvrtc_to_ieee_operations_only() {
    let compiler = super::cuda::Compiler::load().unwrap();
    let source = super::cuda::source();
    let contracting: Vec<&str> = super::cuda::NVRTC_OPTIONS
        .iter()
        .map(|o| if *o == "--fmad=false" { "--fmad=true" } else { o })
        .collect();
    assert_ne!(contracting, super::cuda::NVRTC_OPTIONS, "the options no longer say --fmad=false");
    for (major, minor) in [(9, 0), (7, 5)] {
        let cubin = compiler.compile(&source, major, minor, false).unwrap();
        assert!(!cubin.is_ptx && cubin.image.starts_with(b"\x7fELF"), "sm_{major}{minor}: not a cubin");
        let ptx = compiler.compile(&source, major, minor, true).unwrap();
        let text = String::from_utf8_lossy(&ptx.image).into_owned();
        for kernel in super::backend::Kernel::ALL {
            assert!(text.contains(&format!(".entry {}(", kernel.name())), "no entry {}", kernel.name());
        }
        let mut fused = 0;
        for line in text.lines().map(str::trim) {
            let op = line.split_whitespace().next().unwrap_or("");
            for forbidden in
                [".approx", ".ftz", ".full", "ex2.", "lg2.", "rsqrt", "rcp.", "sin.", "cos.", "tanh."]
            {
                assert!(!op.contains(forbidden), "sm_{major}{minor}: {line}");
            }
            let float = op.ends_with(".f32") || op.ends_with(".f64");
            let arithmetic = ["add.", "sub.", "mul.", "div.", "sqrt."].iter().any(|a| op.starts_with(a));
            if float && arithmetic {
                assert!(
                    op.contains(".rn."),
                    "sm_{major}{minor}: float arithmetic without IEEE rounding: {line}"
                );
            }
            if float && (op.starts_with("fma.") || op.starts_with("mad.")) {
                assert!(op.starts_with("fma.rn.f32"), "sm_{major}{minor}: {line}");
                fused += 1;
            }
        }
        assert!(fused > 0, "sm_{major}{minor}: no fma at all");
        let contracted = compiler.compile_with(&source, (major, minor), true, &contracting).unwrap();
        assert!(
            contracted.image == ptx.image,
            "sm_{major}{minor}: --fmad=true changes the PTX, so the source has a multiply-add the compiler may \
             fuse:\n{}",
            first_difference(&text, &String::from_utf8_lossy(&contracted.image))
        );
    }
    // The comparison can fail: a plain multiply-add is fused under --fmad=true and not under --fmad=false.
    let plain = "extern \"C\" __global__ void k(float* x) { x[0] = x[1] * x[2] + x[3]; }";
    let kept = compiler.compile_with(plain, (9, 0), true, &super::cuda::NVRTC_OPTIONS).unwrap();
    let fused = compiler.compile_with(plain, (9, 0), true, &contracting).unwrap();
    assert!(kept.image != fused.image, "--fmad=true left a plain multiply-add as it was");
    assert!(String::from_utf8_lossy(&fused.image).contains("fma.rn.f32"));
    eprintln!("{}", compiler.describe());
}

/// The first line where two PTX texts differ, with its neighbours.
fn first_difference(a: &str, b: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let at = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    let around = |lines: &[&str]| lines[at.saturating_sub(3)..(at + 3).min(lines.len())].join("\n");
    format!("line {}:\n--fmad=false:\n{}\n--fmad=true:\n{}", at + 1, around(&a), around(&b))
}
