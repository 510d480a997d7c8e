//! What the targets of the CLI output readers share: the input's first byte is how the run
//! ended, the rest what the program printed; the outcome is checked the same way.

use aw::run::backend::{RunOutcome, Status};

/// How the run ended, and the bytes printed.
pub fn split(data: &[u8]) -> Option<(Status, &[u8])> {
    let (&b, printed) = data.split_first()?;
    let status = [Status::Ok, Status::Failed, Status::Timeout, Status::Killed][b as usize % 4];
    Some((status, printed))
}

/// What holds of any outcome a reader makes.
pub fn check(ended: Status, out: &RunOutcome) {
    match ended {
        // A run that was stopped keeps its status; what it spent is all that is read.
        Status::Timeout | Status::Killed => {
            assert_eq!(out.status, ended);
            assert!(out.final_text.is_empty());
        }
        Status::Failed => assert_eq!(out.status, Status::Failed),
        Status::Ok => {}
    }
    match out.status {
        Status::Ok => {
            assert_eq!(
                out.final_text.trim(),
                out.final_text,
                "the final text is trimmed"
            );
            assert!(out.reason.is_none());
            assert!(
                out.usage.is_some(),
                "an answer that ends well has its usage"
            );
        }
        Status::Failed => {
            let why = out.reason.as_deref().expect("a failure says why");
            assert!(
                !why.contains('\n'),
                "a reason on more than one line: {why:?}"
            );
        }
        Status::Timeout | Status::Killed => {}
    }
    if let Some(c) = out.usage.as_ref().and_then(|u| u.cost_usd) {
        assert!(c.is_finite(), "cost {c}");
    }
}
