use std::process::ExitCode;

fn main() -> ExitCode {
    aw::cli::main("aw-mcp", aw::cli::mcp::run)
}
