//! The `scifact-audit` driver: parses the command line, runs one subcommand, maps the outcome to an exit code.

mod audit;
mod bm25_flat;
mod build;
mod cli;
mod compare;
mod compare_suite;
mod corpus;
mod datasets;
mod device;
mod embed;
mod eval;
mod export;
mod guard;
mod model;
mod progress;
mod reproduce;
mod run;
mod selection;
mod suite;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(error) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("error: {}", chain(&error));
            }
            guard::stopped_code(&error).map_or(ExitCode::from(2), ExitCode::from)
        }
    }
}

/// The error and its causes, each said once: a cause whose text the message already holds (an I/O error that
/// names its path and its reason, say) is not repeated.
fn chain(error: &anyhow::Error) -> String {
    let mut message = error.to_string();
    for cause in error.chain().skip(1) {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

/// Refuses a value of the kernels' cap that names none, and says when a cap is in force: it changes speed only.
fn simd_cap() -> anyhow::Result<()> {
    let var = semantic_memory::SIMD_CAP_VAR;
    match semantic_memory::SimdCap::from_env() {
        Ok(None) => Ok(()),
        Ok(Some(cap)) => {
            #[allow(clippy::print_stderr)]
            {
                let cap = cap.name();
                eprintln!(
                    "note: {var}={cap}: kernels capped (speed only: every kernel gives the same bits; the hosts \
                     recorded say so)"
                );
            }
            Ok(())
        }
        Err(value) => anyhow::bail!("{var}={value:?} names no kernel cap: use avx512, avx2 or portable"),
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = cli::Cli::parse();
    simd_cap()?;
    embedding::keep_freed_memory_for_reuse();
    match cli.command {
        cli::Command::Embed(args) => embed::run(&args),
        cli::Command::Build(args) => build::run(&args),
        cli::Command::Run(args) => run::run(&args),
        cli::Command::BuildSparse(args) => run::build_sparse(&args),
        cli::Command::Eval(args) => eval::run(&args),
        cli::Command::Validate(args) => audit::validate(&args),
        cli::Command::Verify(args) => audit::verify(&args),
        cli::Command::Export(args) => export::run(&args),
        cli::Command::Datasets(args) => datasets::run(&args),
        cli::Command::Keygen(args) => audit::keygen(&args),
        cli::Command::Bundle(args) => audit::bundle(&args),
        cli::Command::Sign(args) => audit::sign(&args),
        cli::Command::VerifyBundle(args) => audit::verify_bundle(&args),
        cli::Command::VerifySuite(args) => audit::verify_suite(&args),
        cli::Command::Reproduce(args) => reproduce::run(&args),
        cli::Command::VerifyReproduction(args) => audit::verify_reproduction(&args),
        cli::Command::Compare(args) => compare::run(&args),
        cli::Command::VerifyComparison(args) => compare::verify(&args),
        cli::Command::Device(args) => device::run(&args),
        cli::Command::Bm25Flat(args) => bm25_flat::run(&args),
    }
}
