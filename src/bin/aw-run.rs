use std::process::ExitCode;

fn main() -> ExitCode {
    // Before the arguments: the guard started by aw-run takes none.
    if aw::run::guard::is_guard() {
        return aw::run::guard::serve();
    }
    aw::cli::main("aw-run", aw::cli::run::run)
}
