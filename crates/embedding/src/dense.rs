//! sentence-transformers' `Dense` modules, which some checkpoints put between the pooling and the
//! normalisation (EmbeddingGemma's two, stella's projection): `activation(W·x + b)`, plus the input (or its
//! projection) with `use_residual`. Each output is one fused multiply-add chain over the inputs in order, from
//! its bias, so it has the same bits on every CPU.

use std::path::Path;

use serde_json::Value;

use crate::checkpoint::invalid;
use crate::error::Result;
use crate::model_dir::ModelDir;

/// The most bytes a Dense module's weights file may have (EmbeddingGemma's 768 × 3072 projections are 9 MiB).
const MAX_DENSE_BYTES: u64 = 1 << 30;

/// The widths a Dense module may declare.
const MAX_FEATURES: u64 = 65_536;

/// A Dense module's activation: sentence-transformers saves the class's path, and without one (or with a path
/// outside `torch.`, which it will not import) it runs Tanh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `torch.nn.modules.linear.Identity`.
    Identity,
    /// `torch.nn.modules.activation.Tanh`, as `1 − 2/(e^{2u} + 1)` with the forward pass's own `exp`.
    Tanh,
}

/// What a Dense module's `config.json` declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenseSpec {
    /// Its folder in the checkpoint (`modules.json`'s `path`).
    pub path: String,
    /// Input width: the pooled vector's, or the module before it's output.
    pub in_features: usize,
    /// Output width.
    pub out_features: usize,
    /// Whether `linear.bias` is added.
    pub bias: bool,
    /// The activation after the product.
    pub activation: Activation,
    /// Whether the input (or, when the widths differ, `residual.weight` times it) is added after the
    /// activation.
    pub residual: bool,
}

impl DenseSpec {
    /// The spec of the Dense module at `path` (`{path}/config.json`, already parsed as `value`), whose input is
    /// `width` wide.
    pub(crate) fn read(file: &Path, path: &str, value: &Value, width: usize) -> Result<DenseSpec> {
        let count = |key: &str| -> Result<usize> {
            value
                .get(key)
                .and_then(Value::as_u64)
                .filter(|n| (1..=MAX_FEATURES).contains(n))
                .map(|n| n as usize)
                .ok_or_else(|| invalid(file, format!("{key} is not a width within 1..={MAX_FEATURES}")))
        };
        let flag = |key: &str, default: bool| -> Result<bool> {
            match value.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(flag) => {
                    flag.as_bool().ok_or_else(|| invalid(file, format!("{key} {flag} is not a boolean")))
                }
            }
        };
        let in_features = count("in_features")?;
        if in_features != width {
            return Err(invalid(
                file,
                format!("in_features {in_features} is not the width {width} it receives"),
            ));
        }
        for key in ["module_input_name", "module_output_name"] {
            if let Some(name) = value.get(key).filter(|v| !v.is_null())
                && name.as_str() != Some("sentence_embedding")
            {
                return Err(invalid(
                    file,
                    format!(
                        "{key} {name} is not \"sentence_embedding\" (a Dense over the pooled vector is run here)"
                    ),
                ));
            }
        }
        let activation = match value.get("activation_function").and_then(Value::as_str) {
            None => Activation::Tanh,
            Some("torch.nn.modules.activation.Tanh") => Activation::Tanh,
            Some("torch.nn.modules.linear.Identity") => Activation::Identity,
            Some(other) if other.starts_with("torch.") => {
                return Err(invalid(
                    file,
                    format!("activation_function {other:?} is not run here (Tanh and Identity are)"),
                ));
            }
            // sentence-transformers imports no class outside torch without remote code: it runs its default.
            Some(_) => Activation::Tanh,
        };
        Ok(DenseSpec {
            path: path.to_owned(),
            in_features,
            out_features: count("out_features")?,
            bias: flag("bias", true)?,
            activation,
            residual: flag("use_residual", false)?,
        })
    }
}

/// A Dense module with its weights.
pub(crate) struct Dense {
    spec: DenseSpec,
    /// `linear.weight`, `out_features` rows of `in_features`.
    weight: Vec<f32>,
    /// `linear.bias`, or zeros.
    bias: Vec<f32>,
    /// `residual.weight` (`out_features` rows of `in_features`) when the residual is projected.
    residual: Option<Vec<f32>>,
}

impl Dense {
    /// Reads `{spec.path}/model.safetensors` from `dir`; returns the module and the file's sha256.
    pub(crate) fn load(dir: &ModelDir, root: &Path, spec: &DenseSpec) -> Result<(Dense, String)> {
        let name = format!("{}/model.safetensors", spec.path);
        let file = root.join(&name);
        let bytes = dir.read(&name, MAX_DENSE_BYTES)?;
        let digest = crate::sha256_hex(&bytes);
        Ok((Dense::from_root(&file, &bytes, spec)?, digest))
    }

    /// The module from the safetensors `bytes` of `file` (its own, or a whole checkpoint's that keeps
    /// `linear.weight` beside the encoder, as colbert-ai's does).
    pub(crate) fn from_root(file: &Path, bytes: &[u8], spec: &DenseSpec) -> Result<Dense> {
        let tensors = safetensors::SafeTensors::deserialize(bytes).map_err(|e| invalid(file, e))?;
        let (n, k) = (spec.out_features, spec.in_features);
        let get = |tensor: &str, shape: &[usize]| -> Result<Vec<f32>> {
            let view = tensors.tensor(tensor).map_err(|_| invalid(file, format!("no tensor {tensor}")))?;
            if view.dtype() != safetensors::Dtype::F32 || view.shape() != shape {
                return Err(invalid(
                    file,
                    format!("{tensor} is {:?} {:?}, not F32 {shape:?}", view.dtype(), view.shape()),
                ));
            }
            let values: Vec<f32> =
                view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            match values.iter().position(|x| !x.is_finite()) {
                Some(at) => {
                    Err(invalid(file, format!("{tensor}[{at}] is {}: not a finite weight", values[at])))
                }
                None => Ok(values),
            }
        };
        let weight = get("linear.weight", &[n, k])?;
        let bias = if spec.bias { get("linear.bias", &[n])? } else { vec![0.0; n] };
        let residual = if spec.residual && n != k { Some(get("residual.weight", &[n, k])?) } else { None };
        Ok(Dense { spec: spec.clone(), weight, bias, residual })
    }

    /// The width of its output.
    pub(crate) fn out_features(&self) -> usize {
        self.spec.out_features
    }

    /// `m` rows of `x` through the module at once, the product on the forward pass's kernels (`packed`, from
    /// [`Dense::packed`]): a token-level projection (ColBERT's), every row's values one fused multiply-add chain
    /// in a fixed order, so the same bits on every kernel; the activation and residual as [`Dense::apply`]'s.
    pub(crate) fn apply_rows(
        &self,
        kernels: crate::bert::Kernels,
        packed: &crate::bert::gemm::Packed,
        x: &[f32],
        m: usize,
    ) -> Vec<f32> {
        let (k, n) = (self.spec.in_features, self.spec.out_features);
        let mut out = vec![0.0f32; m * n];
        crate::bert::gemm::linear(kernels, x, m, packed, &mut out);
        for (row, input) in out.chunks_exact_mut(n).zip(x.chunks_exact(k)) {
            self.activate_and_add(row, input);
        }
        out
    }

    /// The module's product packed for [`Dense::apply_rows`].
    pub(crate) fn packed(&self, kernels: crate::bert::Kernels) -> crate::bert::gemm::Packed {
        crate::bert::gemm::Packed::new(
            &self.weight,
            &self.bias,
            self.spec.out_features,
            self.spec.in_features,
            kernels,
        )
    }

    /// `x` through the module.
    pub(crate) fn apply(&self, x: &[f32]) -> Vec<f32> {
        let mut out = product(&self.weight, &self.bias, self.spec.in_features, x);
        self.activate_and_add(&mut out, x);
        out
    }

    /// What follows the product for one row: the activation, then the residual (`input`, or `residual.weight`
    /// times it), one addition per value.
    fn activate_and_add(&self, row: &mut [f32], input: &[f32]) {
        if self.spec.activation == Activation::Tanh {
            for value in row.iter_mut() {
                *value = 1.0 - 2.0 / (crate::bert::exp(2.0 * *value) + 1.0);
            }
        }
        if self.spec.residual {
            let added = match &self.residual {
                Some(weight) => {
                    product(weight, &vec![0.0; self.spec.out_features], self.spec.in_features, input)
                }
                None => input.to_vec(),
            };
            for (o, r) in row.iter_mut().zip(added) {
                *o += r;
            }
        }
    }
}

/// `weight` (rows of `k`) times `x`, each output one fused multiply-add chain over `k` in order from `start`'s value.
fn product(weight: &[f32], start: &[f32], k: usize, x: &[f32]) -> Vec<f32> {
    weight
        .chunks_exact(k)
        .zip(start)
        .map(|(row, from)| row.iter().zip(x).fold(*from, |acc, (w, v)| v.mul_add(*w, acc)))
        .collect()
}
