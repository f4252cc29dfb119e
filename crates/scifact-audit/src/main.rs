//! The `scifact-audit` driver: parses the command line, runs one subcommand, maps the outcome to an exit code.

mod audit;
mod build;
mod cli;
mod compare;
mod corpus;
mod embed;
mod eval;
mod export;
mod model;
mod progress;
mod reproduce;
mod run;
mod selection;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(error) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("error: {error:#}");
            }
            ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = cli::Cli::parse();
    embedding::keep_freed_memory_for_reuse();
    match cli.command {
        cli::Command::Embed(args) => embed::run(&args),
        cli::Command::Build(args) => build::run(&args),
        cli::Command::Run(args) => run::run(&args),
        cli::Command::Eval(args) => eval::run(&args),
        cli::Command::Validate(args) => audit::validate(&args),
        cli::Command::Verify(args) => audit::verify(&args),
        cli::Command::Export(args) => export::run(&args),
        cli::Command::Keygen(args) => audit::keygen(&args),
        cli::Command::Bundle(args) => audit::bundle(&args),
        cli::Command::Sign(args) => audit::sign(&args),
        cli::Command::VerifyBundle(args) => audit::verify_bundle(&args),
        cli::Command::Reproduce(args) => reproduce::run(&args),
        cli::Command::VerifyReproduction(args) => audit::verify_reproduction(&args),
        cli::Command::Compare(args) => compare::run(&args),
        cli::Command::VerifyComparison(args) => compare::verify(&args),
    }
}
