use std::process::ExitCode;

fn main() -> ExitCode {
    aw::cli::main("aw-send", aw::cli::send::run)
}
