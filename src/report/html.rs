//! A report as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched.
//! Every text of the instance is escaped (agents' messages are not to be trusted). Light or
//! dark as the reader prefers, and printable. The messages shown are at most
//! [`MAX_MESSAGES`], the first and the last half of them; the page says how many were left
//! out between.

use std::fmt::Write;

use super::data::{Message, Report};
use super::format::{count, duration, esc, outcome_class};
use super::svg::timeline;
use crate::usage::{Usage, money};

/// Most messages listed.
pub const MAX_MESSAGES: usize = 400;

/// The style of the page.
const STYLE: &str = "\
:root{--bg:#fff;--fg:#1d1f21;--mute:#666;--line:#ddd;--lane:#f4f5f7;--lane2:#eceef1;\
--ok:#2e9d4f;--failed:#d23f3f;--timeout:#d9892b;--killed:#8a4fd1;--other:#7a7a7a;\
--tick:#2767c9;--wake:#2767c9;--code:#f6f6f6}\
@media (prefers-color-scheme:dark){:root{--bg:#16181b;--fg:#e3e3e3;--mute:#9a9a9a;\
--line:#33363b;--lane:#1f2226;--lane2:#25282d;--tick:#6ea4ff;--wake:#6ea4ff;--code:#202328}}\
body{background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;\
max-width:1100px;padding:0 1em}\
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.1em;margin-top:1.6em;border-bottom:1px solid \
var(--line)}p.meta,.mute{color:var(--mute)}\
table{border-collapse:collapse;width:100%;margin:.5em 0}th,td{text-align:left;padding:3px 8px;\
border-bottom:1px solid var(--line);vertical-align:top}td.n,th.n{text-align:right;\
font-variant-numeric:tabular-nums}tr.total td{font-weight:600}\
pre{background:var(--code);padding:.5em;overflow-x:auto;white-space:pre-wrap;\
word-break:break-word;margin:.3em 0}\
.msg{white-space:pre-wrap;word-break:break-word}\
svg.timeline{display:block;margin:.5em 0}svg text{fill:var(--fg);font-size:12px}\
svg text.axis{fill:var(--mute);font-size:11px}.lane{fill:var(--lane)}.lane.other{fill:var(--lane2)}\
.grid{stroke:var(--line)}.idle{fill:var(--bg)}.tick{stroke:var(--tick);stroke-width:1.5}\
.wake{stroke:var(--wake);stroke-width:1;opacity:.55}.arrowhead{fill:var(--wake)}\
.bar.ok{fill:var(--ok)}.bar.failed{fill:var(--failed)}.bar.timeout{fill:var(--timeout)}\
.bar.killed{fill:var(--killed)}.bar.other{fill:var(--other)}\
.st{font-weight:600}.st.ok{color:var(--ok)}.st.failed{color:var(--failed)}\
.st.timeout{color:var(--timeout)}.st.killed{color:var(--killed)}\
.key span{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:-1px}\
.key .ok{background:var(--ok)}.key .failed{background:var(--failed)}\
.key .timeout{background:var(--timeout)}.key .killed{background:var(--killed)}\
@media print{body{max-width:none;margin:0;font-size:11px}h2{break-after:avoid}\
tr,pre,svg{break-inside:avoid}}";

/// The page of `r`.
pub fn render(r: &Report) -> String {
    let mut s = String::with_capacity(256 * 1024 + r.messages.len() * 200);
    let title = match r.run {
        Some(n) => format!("aw report: {}, run {n}", r.instance),
        None => format!("aw report: {}", r.instance),
    };
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    let when = match (&r.start, &r.end) {
        (Some(a), Some(b)) => format!("from {} to {}", esc(a), esc(b)),
        _ => "nothing has happened yet".to_string(),
    };
    let _ = writeln!(
        s,
        "<p class=\"meta\">{when}; made {} by aw {}</p>",
        esc(&r.generated),
        esc(crate::VERSION)
    );
    totals(&mut s, r);
    let (svg, left) = timeline(r);
    if !svg.is_empty() {
        s.push_str(
            "<h2 id=\"timeline\">Timeline</h2>\n<p class=\"key mute\">attempts:\
             <span class=\"ok\"></span>ok<span class=\"failed\"></span>failed\
             <span class=\"timeout\"></span>timeout<span class=\"killed\"></span>killed; \
             ticks: messages; arrows: the message that woke an attempt</p>\n",
        );
        s.push_str(&svg);
        if left > 0 {
            let _ = write!(
                s,
                "<p class=\"mute\">{} more wakes are not drawn (see Who woke whom).</p>",
                count(left as u64)
            );
        }
        s.push('\n');
    }
    wakes(&mut s, r);
    failures(&mut s, r);
    messages(&mut s, r);
    records(&mut s, r);
    runs(&mut s, r);
    if !r.problems.is_empty() {
        s.push_str("<h2 id=\"problems\">Not read</h2>\n<ul>");
        for p in &r.problems {
            let _ = write!(s, "<li>{}</li>", esc(p));
        }
        s.push_str("</ul>\n");
    }
    s.push_str("</body></html>\n");
    s
}

/// The cells of a usage: input, output, cache read, cache write tokens, and cost.
fn usage_cells(u: Option<&Usage>) -> String {
    let Some(u) = u else {
        return "<td class=\"n\">-</td>".repeat(5);
    };
    let cost = u.cost_usd.map_or_else(|| "-".to_string(), money);
    format!(
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
         <td class=\"n\">{}</td><td class=\"n\">{}</td>",
        count(u.input_tokens),
        count(u.output_tokens),
        count(u.cache_read_tokens),
        count(u.cache_write_tokens),
        esc(&cost)
    )
}

/// Per agent and in total: attempts, outcomes, time, messages, tokens and cost.
fn totals(s: &mut String, r: &Report) {
    s.push_str(
        "<h2 id=\"totals\">Agents and totals</h2>\n<table class=\"totals\"><thead><tr>\
         <th>agent</th><th>backend</th><th class=\"n\">attempts</th><th class=\"n\">ok</th>\
         <th class=\"n\">failed</th><th class=\"n\">busy</th><th class=\"n\">sent</th>\
         <th class=\"n\">mentioned</th><th class=\"n\">input</th><th class=\"n\">output</th>\
         <th class=\"n\">cache read</th><th class=\"n\">cache write</th><th class=\"n\">cost</th>\
         </tr></thead><tbody>\n",
    );
    for a in &r.agents {
        let _ = writeln!(
            s,
            "<tr class=\"agent\"><td>{}</td><td>{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td>{}</tr>",
            esc(&a.name),
            esc(a.backend.as_deref().unwrap_or("-")),
            count(a.attempts),
            count(a.ok),
            count(a.failed),
            duration(a.busy_ms),
            count(a.sent),
            count(a.mentioned),
            usage_cells(a.usage.as_ref())
        );
    }
    let t = &r.totals;
    let _ = writeln!(
        s,
        "<tr class=\"total\"><td>total</td><td></td><td class=\"n\">{}</td>\
         <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
         <td class=\"n\">{}</td><td class=\"n\">{} wakes</td>{}</tr></tbody></table>",
        count(t.attempts),
        count(t.ok),
        count(t.failed),
        duration(t.busy_ms),
        count(t.messages),
        count(t.wakes),
        usage_cells(t.usage.as_ref())
    );
    if let Some(l) = &r.ledger {
        let cost = l.spent.cost_usd.map_or_else(|| "-".to_string(), money);
        let _ = writeln!(
            s,
            "<p class=\"mute\">_state/budget.json: {} tokens and {} spent since {}.</p>",
            count(l.spent.tokens()),
            esc(&cost),
            esc(l.since.as_deref().unwrap_or("-"))
        );
    }
}

/// Who woke whom: how many entries of each sender an agent's attempts ran on.
fn wakes(s: &mut String, r: &Report) {
    if r.wakes.is_empty() {
        return;
    }
    let mut pairs: std::collections::BTreeMap<(&str, &str), (u64, Vec<u64>)> =
        std::collections::BTreeMap::new();
    for w in &r.wakes {
        let p = pairs.entry((&w.from, &w.to)).or_default();
        p.0 += 1;
        if p.1.len() < 8 {
            p.1.push(w.entry);
        }
    }
    s.push_str(
        "<h2 id=\"wakes\">Who woke whom</h2>\n<table class=\"wakes\"><thead><tr>\
         <th>from</th><th></th><th>woke</th><th class=\"n\">entries</th><th>first ones</th>\
         </tr></thead><tbody>\n",
    );
    for ((from, to), (n, ids)) in &pairs {
        let ids: Vec<String> = ids.iter().map(|i| format!("#{i}")).collect();
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>&rarr;</td><td>{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(from),
            esc(to),
            count(*n),
            ids.join(" ")
        );
    }
    s.push_str("</tbody></table>\n");
}

/// The attempts that did not succeed, each with its reason and last lines.
fn failures(s: &mut String, r: &Report) {
    let failed: Vec<_> = r.attempts.iter().filter(|a| a.status != "ok").collect();
    let _ = writeln!(
        s,
        "<h2 id=\"failures\">Failures</h2>\n<p class=\"mute\">{} of {} attempts did not \
         succeed.</p>",
        count(failed.len() as u64),
        count(r.attempts.len() as u64)
    );
    for a in failed {
        let exit = a
            .exit_code
            .map_or_else(String::new, |c| format!(", exit {c}"));
        let _ = writeln!(
            s,
            "<div class=\"failure\"><p><b>{}</b> #{} (run {}, attempt {}) \
             <span class=\"st {}\">{}</span>{exit}, {} after {}: {}</p>",
            esc(&a.agent),
            a.n,
            a.agent_run,
            a.attempt,
            outcome_class(&a.status),
            esc(&a.status),
            esc(&a.started),
            duration(a.duration_ms),
            esc(a.reason.as_deref().unwrap_or("no reason given"))
        );
        match a.last_lines.as_deref() {
            Some(l) if !l.trim().is_empty() => {
                let _ = writeln!(s, "<pre>{}</pre>", esc(l));
            }
            _ => s.push_str("<p class=\"mute\">no output</p>\n"),
        }
        s.push_str("</div>\n");
    }
}

/// The messages: all of them, or the first and the last [`MAX_MESSAGES`] / 2.
fn messages(s: &mut String, r: &Report) {
    let all = &r.messages;
    let _ = writeln!(
        s,
        "<h2 id=\"messages\">Messages</h2>\n<p class=\"mute\">{} messages.</p>",
        count(all.len() as u64)
    );
    if all.is_empty() {
        return;
    }
    s.push_str(
        "<table class=\"messages\"><thead><tr><th class=\"n\">id</th><th>time</th>\
         <th>from</th><th>to</th><th>message</th></tr></thead><tbody>\n",
    );
    let half = MAX_MESSAGES / 2;
    let (head, tail): (&[Message], &[Message]) = match all.len() > MAX_MESSAGES {
        true => (&all[..half], &all[all.len() - half..]),
        false => (all, &[]),
    };
    let row = |s: &mut String, m: &Message| {
        let more = match m.cut {
            true => format!(
                " <span class=\"mute\">[{} bytes in all; aw-peek --since {} -n 1 shows it]</span>",
                m.len,
                m.id - 1
            ),
            false => String::new(),
        };
        let _ = writeln!(
            s,
            "<tr><td class=\"n\">#{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"msg\">{}{more}</td></tr>",
            m.id,
            esc(crate::time::hms(&m.at)),
            esc(&m.from),
            esc(&m.mentions.join(", ")),
            esc(&m.text)
        );
    };
    for m in head {
        row(s, m);
    }
    if !tail.is_empty() {
        let left = all.len() - head.len() - tail.len();
        let _ = writeln!(
            s,
            "<tr class=\"left-out\"><td colspan=\"5\" class=\"mute\">{} messages left out, \
             #{} to #{} (aw-peek --since {} -n {left} shows them)</td></tr>",
            count(left as u64),
            all[half].id,
            all[all.len() - half - 1].id,
            all[half].id - 1
        );
        for m in tail {
            row(s, m);
        }
    }
    s.push_str("</tbody></table>\n");
}

/// The cards, approval requests and merge requests, when there are any.
fn records(s: &mut String, r: &Report) {
    if !r.cards.is_empty() {
        s.push_str(
            "<h2 id=\"cards\">Cards</h2>\n<table><thead><tr><th class=\"n\">id</th>\
             <th>state</th><th>title</th><th>holder</th><th>for</th><th>updated</th>\
             <th>note</th></tr></thead><tbody>\n",
        );
        for c in &r.cards {
            let _ = writeln!(
                s,
                "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td></tr>",
                c.id,
                esc(&c.state),
                esc(&c.title),
                esc(c.holder.as_deref().unwrap_or("-")),
                esc(&c.assignee.join(", ")),
                esc(&c.updated),
                esc(c.note.as_deref().unwrap_or(""))
            );
        }
        s.push_str("</tbody></table>\n");
    }
    if !r.approvals.is_empty() {
        s.push_str(
            "<h2 id=\"approvals\">Approvals</h2>\n<table><thead><tr><th class=\"n\">id</th>\
             <th>state</th><th>kind</th><th>what</th><th>asked by</th><th>approvers</th>\
             <th>decided by</th><th>reason</th></tr></thead><tbody>\n",
        );
        for a in &r.approvals {
            let _ = writeln!(
                s,
                "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td></tr>",
                a.id,
                esc(&a.state),
                esc(&a.kind),
                esc(&a.what),
                esc(&a.asked_by),
                esc(&a.by.join(", ")),
                esc(a.decided_by.as_deref().unwrap_or("-")),
                esc(a.reason.as_deref().unwrap_or(""))
            );
        }
        s.push_str("</tbody></table>\n");
    }
    if !r.merges.is_empty() {
        s.push_str(
            "<h2 id=\"merges\">Merges</h2>\n<table><thead><tr><th class=\"n\">id</th>\
             <th>state</th><th>agent</th><th>branch</th><th>into</th><th>asked</th>\
             <th>result</th></tr></thead><tbody>\n",
        );
        for m in &r.merges {
            let _ = writeln!(
                s,
                "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td></tr>",
                m.id,
                esc(&m.state),
                esc(&m.agent),
                esc(&m.branch),
                esc(&m.into),
                esc(&m.asked),
                esc(&m.outcome)
            );
        }
        s.push_str("</tbody></table>\n");
    }
}

/// The runs of the instance (`aw-run` processes), the one reported on marked.
fn runs(s: &mut String, r: &Report) {
    if r.runs.is_empty() {
        return;
    }
    s.push_str(
        "<h2 id=\"runs\">Runs</h2>\n<p class=\"mute\">A run is one aw-run process; \
         aw-ctl report --run N reports on one.</p>\n<table><thead><tr><th class=\"n\">run</th>\
         <th>host</th><th class=\"n\">pid</th><th>start</th><th>end</th>\
         <th class=\"n\">attempts</th><th class=\"n\">failed</th><th>agents</th></tr></thead>\
         <tbody>\n",
    );
    for run in &r.runs {
        let mark = if r.run == Some(run.n) { " &larr;" } else { "" };
        let _ = writeln!(
            s,
            "<tr><td class=\"n\">{}{mark}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td>\
             <td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            run.n,
            esc(run.host.as_deref().unwrap_or("-")),
            run.pid.map_or_else(|| "-".to_string(), |p| p.to_string()),
            esc(&run.start),
            esc(&run.end),
            count(run.attempts),
            count(run.failed),
            esc(&run.agents.join(", "))
        );
    }
    s.push_str("</tbody></table>\n");
}
