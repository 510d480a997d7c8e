use std::process::ExitCode;

fn main() -> ExitCode {
    aw::cli::main("aw-peek", aw::cli::peek::run)
}
