//! The `scifact-audit` driver: parses the command line, runs one subcommand, maps the outcome to an exit code.

mod build;
mod cli;
mod embed;
mod model;
mod progress;
mod run;

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
    }
}
