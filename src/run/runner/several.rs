//! One process serving agents of several instances (`aw-run --serve a@one b@two`, see
//! [`super::serve_several`]): one serving loop per instance, each in its own thread, as
//! [`super::serve`] runs one. A
//! signal, or a stop request to any of them, stops all (see [`super::signals`]); each ends
//! by its own rules otherwise; the process ends when all have, with the highest of their
//! exit codes.

use std::io::{BufRead, Read, Write};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use super::drive::drive;
use super::serving::Serving;
use super::signals;
use super::start::Start;
use crate::error::{Error, Result, exit};
use crate::run::controller::Controller;

/// Drive one serving loop per instance (its server, controllers and the newest entry
/// when it started), each in its own thread, until all have ended; the highest of their
/// exit codes. `ready` is the readiness pipe of a detached process.
pub(super) fn drive_all(
    prepared: Vec<(Serving, Vec<Controller>, u64)>,
    ready: Option<Arc<std::fs::File>>,
) -> Result<u8> {
    // Before any thread starts: only the signal thread takes them.
    signals::block()?;
    crate::run::live::several_runs();
    let ready = Ready::pipes(ready, prepared.len())?;
    let codes: Vec<(u8, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = prepared
            .into_iter()
            .zip(ready)
            .map(|((mut serving, controllers, before), mine)| {
                let name = serving.inst.name().to_string();
                serving.opts.label = Some(name.clone());
                serving.opts.ready = mine.clone();
                s.spawn(move || {
                    let r = drive(Arc::new(serving), controllers, before, Start::default());
                    match r {
                        Ok(code) => (code, false),
                        Err(Error::Interrupted) => (exit::INTERRUPTED, true),
                        Err(e) => {
                            // As a single server says it, the instance before it.
                            let (what, hints) = e.split_hints();
                            let line = format!("instance '{name}': {what}").replace('\n', " ");
                            eprintln!("aw-run: {line}");
                            hints.iter().for_each(|h| crate::warn::hint(h));
                            // Detached: the starting process says it too (before this
                            // loop's pipe closes, so before the process tells it is ready).
                            if let Some(w) = &mine {
                                let mut said = format!("!aw-run: {line}\n");
                                hints
                                    .iter()
                                    .for_each(|h| said.push_str(&format!("!hint: {h}\n")));
                                let _ = (&**w).write_all(said.as_bytes());
                            }
                            (e.exit_code(), false)
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or((exit::SOFTWARE, false)))
            .collect()
    });
    let worst = codes.iter().map(|c| c.0).max().unwrap_or(exit::OK);
    // Interrupted: said once, as by a single server.
    if worst == exit::INTERRUPTED && codes.iter().any(|c| c.1) {
        return Err(Error::Interrupted);
    }
    Ok(worst)
}

/// The readiness pipe of a detached server (`--detach`), shared by several loops: each loop
/// gets a pipe of its own; their warnings (`!` lines) are passed on as they come, and `1`
/// once every loop is ready or has ended, at least one of them ready.
struct Ready {
    real: Arc<std::fs::File>,
    state: Mutex<(Vec<Settled>, bool)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Settled {
    Starting,
    Ready,
    Ended,
}

impl Ready {
    /// The pipes of `n` loops (all `None` when the process was not detached).
    fn pipes(
        real: Option<Arc<std::fs::File>>,
        n: usize,
    ) -> Result<Vec<Option<Arc<std::fs::File>>>> {
        let Some(real) = real else {
            return Ok(vec![None; n]);
        };
        let shared = Arc::new(Ready {
            real,
            state: Mutex::new((vec![Settled::Starting; n], false)),
        });
        let mut writers = Vec::new();
        for i in 0..n {
            let (reader, writer) = std::io::pipe().map_err(|e| Error::io("<pipe>", e))?;
            let shared = shared.clone();
            std::thread::spawn(move || shared.forward(i, reader));
            writers.push(Some(Arc::new(std::fs::File::from(OwnedFd::from(writer)))));
        }
        Ok(writers)
    }

    /// Pass on what loop `i` says until its pipe closes.
    fn forward(&self, i: usize, reader: std::io::PipeReader) {
        let mut reader = std::io::BufReader::new(reader);
        loop {
            let mut byte = [0u8; 1];
            match reader.read(&mut byte) {
                Ok(1) if byte[0] == b'1' => self.settle(i, Settled::Ready),
                Ok(1) if byte[0] == b'!' => {
                    let mut line = String::new();
                    let _ = reader.read_line(&mut line);
                    let _st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = (&*self.real).write_all(format!("!{line}").as_bytes());
                }
                Ok(1) => {}
                _ => return self.settle(i, Settled::Ended),
            }
        }
    }

    fn settle(&self, i: usize, how: Settled) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.0[i] == Settled::Starting {
            st.0[i] = how;
        }
        let done = st.0.iter().all(|s| *s != Settled::Starting);
        if done && !st.1 && st.0.contains(&Settled::Ready) {
            st.1 = true;
            let _ = (&*self.real).write_all(b"1");
        }
    }
}
