use std::process::ExitCode;

fn main() -> ExitCode {
    aw::cli::run::main()
}
