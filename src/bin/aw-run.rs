use std::process::ExitCode;

fn main() -> ExitCode {
    aw::cli::main("aw-run", aw::cli::run::run)
}
