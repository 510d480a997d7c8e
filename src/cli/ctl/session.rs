//! `aw-ctl session`: the CLI sessions agents keep across runs (`session: keep`), listed and
//! forgotten.

use super::Call;
use crate::cli::Out;
use crate::error::Result;
use crate::names;

/// `aw-ctl session ls [--json]`: one kept session per line.
pub(super) fn ls(out: &mut Out, a: &Call, _: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    for (agent, k) in crate::sessions::load(&inst)? {
        if a.has("json") {
            let mut v = serde_json::to_value(&k).expect("a session serializes");
            v["agent"] = agent.into();
            out.line(&v.to_string())?;
        } else {
            out.line(&format!(
                "{agent} {} {} runs {} since {} last {}",
                k.backend, k.id, k.runs, k.started, k.updated
            ))?;
        }
    }
    Ok(0)
}

/// `aw-ctl session reset AGENT`: forget AGENT's session; its next run starts a fresh one.
pub(super) fn reset(out: &mut Out, a: &Call, args: &[&str]) -> Result<u8> {
    let inst = a.common.instance()?;
    inst.require()?;
    let agent = args[0];
    names::check_agent(agent)?;
    out.line(&match crate::sessions::forget(&inst, agent)? {
        Some(k) => format!("{agent}: forgot {} session {}", k.backend, k.id),
        None => format!("{agent}: no session kept"),
    })?;
    Ok(0)
}
