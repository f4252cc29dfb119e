//! `scifact-audit device`: where the model would run, and, with `--check`, whether that device's kernels give
//! the CPU's bits.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{DeviceArg, DeviceArgs};

pub(crate) fn run(args: &DeviceArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if !args.check {
        let (device, no_gpu) = embedding::gpu::find(args.device.request())?;
        if args.json {
            let value = serde_json::json!({"device": device.kind(), "description": device.describe(), "no_gpu": no_gpu});
            writeln!(out, "{value}").context("writing stdout")?;
        } else {
            writeln!(out, "device: {}", device.describe()).context("writing stdout")?;
            if let Some(why) = no_gpu {
                writeln!(out, "no usable GPU: {why}").context("writing stdout")?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let request = match args.device {
        DeviceArg::Cpu => {
            anyhow::bail!("--check runs the GPU kernels: ask for --device cuda, emulated or auto")
        }
        other => other.request(),
    };
    let extent =
        if args.self_check { embedding::gpu::Extent::SelfCheck } else { embedding::gpu::Extent::Full };
    let check = embedding::gpu::check_kernels(request, extent, args.throughput)?;
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&check).context("serialising the check")?)
            .context("writing stdout")?;
    } else {
        writeln!(out, "device: {} ({} check; any NaN counts as any NaN)", check.device, check.extent)
            .context("writing stdout")?;
        let scalar = if check.scalar_differing == 0 {
            "every result the CPU's bits".to_owned()
        } else {
            format!("{} results differ from the CPU's", check.scalar_differing)
        };
        writeln!(out, "exp, erf and GELU at {} inputs: {scalar}", check.scalar_inputs)
            .context("writing stdout")?;
        for product in &check.products {
            let [m, n, k] = product.shape;
            let verdict = if product.differing == 0 {
                "every element the fma chain's bits".to_owned()
            } else {
                format!("{} of {} elements differ", product.differing, m * n)
            };
            let gelu = if product.gelu { " + GELU" } else { "" };
            writeln!(out, "{}{gelu} {m} x {n} x {k}: {verdict}", product.kernel).context("writing stdout")?;
        }
        for step in &check.steps {
            let verdict = if step.differing == 0 {
                "every value the CPU's bits".to_owned()
            } else {
                format!("{} of {} values differ", step.differing, step.values)
            };
            writeln!(out, "{} ({}): {verdict}", step.kernel, step.case).context("writing stdout")?;
        }
        for speed in &check.throughput {
            let [m, n, k] = speed.shape;
            writeln!(out, "{} {m} x {n} x {k}: {:.1} TFLOP/s", speed.kernel, speed.tflops)
                .context("writing stdout")?;
        }
        let verdict = if check.exact() {
            "the kernels give the CPU's bits"
        } else {
            "the kernels do NOT give the CPU's bits"
        };
        writeln!(out, "{verdict}").context("writing stdout")?;
    }
    Ok(if check.exact() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
