use std::process::ExitCode;

fn main() -> ExitCode {
    aw::cli::main("aw-ctl", aw::cli::ctl::run)
}
