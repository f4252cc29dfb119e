//! Rotary position embeddings (RoPE, the NeoX "rotate half" layout): the tables, made once at load time by this
//! module's own f64 routines, and the rotation of one head's query or key.
//!
//! The angles are formed as transformers forms them, `inv_freq = 1 / θ^(2i/d)` and `angle = f32(p · inv_freq)`
//! (one f32 product), so that a table is what torch's is up to the rounding of its `pow`, `sin` and `cos`. Those
//! three are computed here in f64 from `+`, `×`, `÷` and comparisons only (no libm, whose results differ between
//! C libraries) and rounded to f32 once: every CPU builds the same tables, and a GPU is handed the same ones.

/// Refuses a configuration whose heads the rotary encoders cannot rotate: a `head_dim` other than hidden /
/// heads (the only width run here) or an odd head width (no halves to rotate). `None` sizes are left to the
/// size checks.
pub(crate) fn check_head_width(
    hidden: Option<u64>,
    heads: Option<u64>,
    head_dim: Option<&serde_json::Value>,
) -> Result<(), String> {
    let (Some(hidden), Some(heads)) = (hidden, heads) else { return Ok(()) };
    if let Some(head_dim) = head_dim
        && (heads == 0 || hidden % heads != 0 || head_dim.as_u64() != Some(hidden / heads))
    {
        return Err(format!(
            "head_dim {head_dim} is not hidden_size {hidden} / num_attention_heads {heads} (only that is run here)"
        ));
    }
    if heads > 0 && (hidden / heads) % 2 == 1 {
        return Err(format!("hidden_size {hidden} / num_attention_heads {heads} is odd: no rotary halves"));
    }
    Ok(())
}

/// Refuses a `rope_type` other than `"default"` in a config's rope entry `entry` (named `at`, e.g.
/// `rope_parameters` or `rope_parameters.sliding_attention`): only unscaled rotary positions run here.
pub(crate) fn default_type(entry: Option<&serde_json::Value>, at: &str) -> Result<(), String> {
    match entry.and_then(|e| e.get("rope_type")).filter(|v| !v.is_null()) {
        Some(kind) if kind.as_str() != Some("default") => {
            Err(format!("{at}.rope_type {kind} is not \"default\""))
        }
        _ => Ok(()),
    }
}

/// A rotary base from a config's `value` (named `key`): a finite number above 1.
pub(crate) fn theta(value: &serde_json::Value, key: &str) -> Result<f64, String> {
    match value.as_f64() {
        Some(theta) if theta.is_finite() && theta > 1.0 => Ok(theta),
        _ => Err(format!("{key} {value} is not a rotary base above 1")),
    }
}

/// cos and sin of every position's angles, `[position][i]` for the `d/2` frequencies of a head of width `d`.
#[derive(Debug, Clone)]
pub(crate) struct Rotary {
    half: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Rotary {
    /// The tables for heads of `head_dim` (even) at positions `0..positions`, with base `theta`.
    pub(crate) fn new(theta: f64, head_dim: usize, positions: usize) -> Rotary {
        let half = head_dim / 2;
        let inverse: Vec<f32> = (0..half)
            .map(|i| {
                // torch: `arange(0, d, 2, dtype=float32) / d`, then `θ ** that` and `1.0 / that`, all in f32.
                let exponent = (2 * i) as f32 / head_dim as f32;
                1.0 / pow(theta, f64::from(exponent)) as f32
            })
            .collect();
        Rotary::of_frequencies(&inverse, positions)
    }

    /// The tables of the inverse frequencies `inverse` at positions `0..positions`.
    fn of_frequencies(inverse: &[f32], positions: usize) -> Rotary {
        let half = inverse.len();
        let (mut cos, mut sin) = (Vec::with_capacity(positions * half), Vec::with_capacity(positions * half));
        for position in 0..positions {
            for frequency in inverse {
                let angle = f64::from(position as f32 * frequency);
                let (s, c) = sin_cos(angle);
                cos.push(c as f32);
                sin.push(s as f32);
            }
        }
        Rotary { half, cos, sin }
    }

    /// Rotates one head's vector `x` (`2 · half` wide) for `position`, as transformers' `apply_rotary_pos_emb`:
    /// `x · cos + rotate_half(x) · sin`, each output one product plus one product, rounded as torch rounds them.
    #[inline]
    pub(crate) fn rotate(&self, x: &mut [f32], position: usize) {
        let at = position * self.half;
        let (cos, sin) = (&self.cos[at..at + self.half], &self.sin[at..at + self.half]);
        let (first, second) = x.split_at_mut(self.half);
        for (((a, b), c), s) in first.iter_mut().zip(second.iter_mut()).zip(cos).zip(sin) {
            let (x1, x2) = (*a, *b);
            *a = x1 * c - x2 * s;
            *b = x2 * c + x1 * s;
        }
    }
}

#[cfg(test)]
impl Rotary {
    /// The tables with each frequency replaced by the next one (the last kept): a table one off, as
    /// `arange(1, ...)` for `arange(0, ...)` would make it, which the parity tests must catch.
    pub(crate) fn frequencies_one_off(&self) -> Rotary {
        let positions = self.cos.len() / self.half;
        // Position 1's angles are the inverse frequencies themselves (1 · ω, exactly), recovered by atan2.
        let inverse: Vec<f32> = (0..self.half)
            .map(|i| f64::from(self.sin[self.half + i]).atan2(f64::from(self.cos[self.half + i])) as f32)
            .collect();
        let shifted: Vec<f32> = (0..self.half).map(|i| inverse[(i + 1).min(self.half - 1)]).collect();
        Rotary::of_frequencies(&shifted, positions)
    }
}

// fdlibm's constants, by their bits: ln 2 in a high part of 32 significant bits and the rest.
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);

/// `x · 2^k` for a normal result, from the exponent bits.
fn scale_by_power_of_two(x: f64, k: i64) -> f64 {
    // Two steps keep each factor a normal number for |k| up to 2044.
    let half = k / 2;
    let factor = |k: i64| f64::from_bits(((1023 + k) as u64) << 52);
    x * factor(half) * factor(k - half)
}

/// The natural logarithm of a positive, finite `x`, within a few ulp: `x = m · 2^k` with `m` in [√½, √2), and
/// `ln m = 2 atanh(s)`, `s = (m - 1)/(m + 1)`, by its series (|s| ≤ 0.172: 14 terms reach 1e-22).
pub(crate) fn ln(x: f64) -> f64 {
    debug_assert!(x > 0.0 && x.is_finite());
    let (mut x, mut k) = (x, 0i64);
    if x < f64::MIN_POSITIVE {
        x *= f64::from_bits((1023 + 54) << 52);
        k -= 54;
    }
    let bits = x.to_bits();
    k += ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > std::f64::consts::SQRT_2 {
        m /= 2.0;
        k += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut term = s;
    let mut sum = 0.0;
    for n in 0..14 {
        sum += term / f64::from(2 * n + 1);
        term *= s2;
    }
    let k = k as f64;
    (k * LN2_HI + 2.0 * sum) + k * LN2_LO
}

/// `e^y` for |y| ≤ 700, within a few ulp: `y = k ln 2 + r` with |r| ≤ ½ ln 2, `e^r` by its Taylor series (22
/// terms), scaled by `2^k`.
pub(crate) fn exp(y: f64) -> f64 {
    debug_assert!(y.abs() <= 700.0);
    let k = (y / std::f64::consts::LN_2).round();
    let r = (y - k * LN2_HI) - k * LN2_LO;
    let mut term = 1.0;
    let mut sum = 1.0;
    for n in 1..22 {
        term *= r / f64::from(n);
        sum += term;
    }
    scale_by_power_of_two(sum, k as i64)
}

/// `base^exponent` for a positive `base`, as `e^(exponent · ln base)`.
pub(crate) fn pow(base: f64, exponent: f64) -> f64 {
    if exponent == 0.0 {
        return 1.0;
    }
    exp(exponent * ln(base))
}

// π/2 in three parts of 33 significant bits (fdlibm's pio2_1, pio2_2, pio2_3): `k · part` is exact for
// |k| < 2^20, so the reduced angle loses nothing for the angles of up to a million radians a table holds.
const PIO2_1: f64 = f64::from_bits(0x3FF9_21FB_5440_0000);
const PIO2_2: f64 = f64::from_bits(0x3DD0_B461_1A60_0000);
const PIO2_3: f64 = f64::from_bits(0x3BA3_198A_2E00_0000);

/// sin and cos of `x` (|x| < 10^6), within a few ulp: `x = k π/2 + r` with |r| ≤ π/4 (Cody–Waite), each of
/// `sin r` and `cos r` by its Taylor series, then the quadrant `k mod 4`.
pub(crate) fn sin_cos(x: f64) -> (f64, f64) {
    debug_assert!(x.abs() < 1e6);
    let k = (x * std::f64::consts::FRAC_2_PI).round();
    let r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
    let r2 = r * r;
    let (mut sin, mut cos) = (0.0, 0.0);
    let (mut s_term, mut c_term) = (r, 1.0);
    for n in 0..14 {
        sin += s_term;
        cos += c_term;
        let n = f64::from(2 * n);
        s_term *= -r2 / ((n + 2.0) * (n + 3.0));
        c_term *= -r2 / ((n + 1.0) * (n + 2.0));
    }
    match (k as i64).rem_euclid(4) {
        0 => (sin, cos),
        1 => (cos, -sin),
        2 => (-sin, -cos),
        _ => (-cos, sin),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relative(a: f64, b: f64) -> f64 {
        if b == 0.0 { a.abs() } else { ((a - b) / b).abs() }
    }

    /// The own routines against the platform's libm (in the test only), well within f32's rounding.
    #[test]
    fn f64_routines_are_accurate() {
        let mut worst = 0.0f64;
        for i in 1..20_000 {
            let x = f64::from(i) * 0.731 + 1e-3;
            worst = worst.max((ln(x) - x.ln()).abs() / x.ln().abs().max(1.0));
            let y = f64::from(i - 10_000) * 0.0537;
            worst = worst.max(relative(exp(y), y.exp()));
        }
        for (base, exponent) in [(1000.0, 0.0625), (10_000.0, 0.96875), (1e6, 0.5), (160_000.0, 0.984_375)] {
            worst = worst.max(relative(pow(base, exponent), f64::powf(base, exponent)));
        }
        assert!(worst < 1e-14, "ln/exp/pow relative error {worst}");
        let mut worst = 0.0f64;
        for i in 0..200_000 {
            let x = f64::from(i) * 0.163_7 - 50.0;
            let (s, c) = sin_cos(x);
            worst = worst.max((s - x.sin()).abs()).max((c - x.cos()).abs());
        }
        for position in [8191.0f64, 32_767.0, 131_071.0] {
            let (s, c) = sin_cos(position);
            worst = worst.max((s - position.sin()).abs()).max((c - position.cos()).abs());
        }
        assert!(worst < 1e-14, "sin/cos absolute error {worst}");
    }

    /// The tables are transformers' angles: position 0 is the identity, frequency 0 turns by one radian per
    /// position, and the last frequency is θ^(-(d-2)/d).
    #[test]
    fn tables_follow_transformers_angles() {
        let rotary = Rotary::new(1000.0, 8, 40);
        assert_eq!(rotary.cos.len(), 40 * 4);
        let mut x = [1.0f32, 2.0, 3.0, 4.0, -1.0, -2.0, -3.0, -4.0];
        let unchanged = x;
        rotary.rotate(&mut x, 0);
        assert_eq!(x, unchanged);
        rotary.rotate(&mut x, 3);
        let (s, c) = (3.0f64.sin() as f32, 3.0f64.cos() as f32);
        assert_eq!(x[0], c + s);
        assert_eq!(x[4], s - c);
        let last = 1.0 / (1000f64.powf(0.75) as f32);
        let angle = f64::from(39.0 * last);
        assert_eq!(rotary.cos[39 * 4 + 3], angle.cos() as f32);
        assert_eq!(rotary.sin[39 * 4 + 3], angle.sin() as f32);
    }
}
