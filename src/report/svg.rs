//! The timeline of a report, as inline SVG: one lane per agent (and per other sender), a
//! bar per attempt coloured by its outcome, a tick where a message was written, and an
//! arrow from a message to the attempt it woke. Ticks that fall on one pixel column of a
//! lane are drawn as one (its title says how many); idle times between stretches of
//! activity are cut out ([`Scale`]); at most [`MAX_ARROWS`] arrows are drawn, and the page
//! says how many were left out.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::data::{Report, millis, rfc3339};
use super::format::{duration, esc, outcome_class};

/// Most arrows drawn from a message to the attempt it woke.
pub const MAX_ARROWS: usize = 300;

/// The width of the drawing, and where the time axis starts and ends in it.
const WIDTH: f64 = 1000.0;
const LEFT: f64 = 140.0;
const RIGHT: f64 = 985.0;
/// The height of a lane, and of the axis at the top.
const LANE: f64 = 34.0;
const TOP: f64 = 26.0;

/// The timeline of `r` as an `<svg>` element, and how many arrows were left out.
pub(super) fn timeline(r: &Report) -> (String, usize) {
    let (Some(start), Some(end)) = (
        r.start.as_deref().and_then(millis),
        r.end.as_deref().and_then(millis),
    ) else {
        return (String::new(), 0);
    };
    let scale = Scale::new(r, start, end);
    let x = |t: i64| scale.x(t);
    let lane: BTreeMap<&str, usize> = r
        .agents
        .iter()
        .enumerate()
        .map(|(i, a)| (a.name.as_str(), i))
        .collect();
    let y = |i: usize| TOP + i as f64 * LANE;
    let height = y(r.agents.len()) + 6.0;
    let mut s = String::with_capacity(64 * 1024);
    let _ = write!(
        s,
        "<svg class=\"timeline\" viewBox=\"0 0 {WIDTH} {height}\" width=\"100%\" \
         role=\"img\" aria-label=\"timeline\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 8 8\" refX=\"7\" refY=\"4\" \
         markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\">\
         <path d=\"M0,0 L8,4 L0,8 z\" class=\"arrowhead\"/></marker></defs>"
    );
    // The axis: five times from the start to the end of each stretch of activity, or its
    // start alone when it is narrow.
    let mut last_label = f64::NEG_INFINITY;
    for seg in &scale.segs {
        let marks = if seg.w > 300.0 { 5 } else { 1 };
        for m in 0..marks {
            let t = seg.start + ((seg.end - seg.start) as f64 * m as f64 / 4.0) as i64;
            let at = x(t);
            if at - last_label < 110.0 {
                continue;
            }
            last_label = at;
            let anchor = if at > RIGHT - 60.0 { "end" } else { "start" };
            let _ = write!(
                s,
                "<line class=\"grid\" x1=\"{at:.1}\" x2=\"{at:.1}\" y1=\"{}\" y2=\"{height}\"/>\
                 <text class=\"axis\" x=\"{at:.1}\" y=\"14\" text-anchor=\"{anchor}\">{}</text>",
                TOP - 4.0,
                esc(&rfc3339(t)[11..23]),
            );
        }
    }
    for (i, a) in r.agents.iter().enumerate() {
        let class = if a.backend.is_some() {
            "lane"
        } else {
            "lane other"
        };
        let _ = write!(
            s,
            "<rect class=\"{class}\" x=\"0\" y=\"{:.1}\" width=\"{WIDTH}\" height=\"{}\"/>\
             <text class=\"name\" x=\"6\" y=\"{:.1}\">{}</text>",
            y(i),
            LANE - 2.0,
            y(i) + LANE / 2.0 + 4.0,
            esc(&a.name)
        );
    }
    // The idle times cut out, over the lanes.
    for pair in scale.segs.windows(2) {
        let gap = (pair[1].start - pair[0].end).max(0) as u64;
        let _ = write!(
            s,
            "<rect class=\"idle\" x=\"{:.1}\" y=\"{}\" width=\"{BREAK:.1}\" height=\"{}\">\
             <title>idle for {}</title></rect>",
            pair[0].x0 + pair[0].w,
            TOP - 4.0,
            height - TOP + 4.0,
            duration(gap)
        );
    }
    for a in &r.attempts {
        let Some(&i) = lane.get(a.agent.as_str()) else {
            continue;
        };
        let x0 = x(a.start_ms);
        let w = (x(a.start_ms + a.duration_ms as i64) - x0).max(3.0);
        let _ = write!(
            s,
            "<rect class=\"bar {}\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{}\">\
             <title>{} #{}: {} in {}</title></rect>",
            outcome_class(&a.status),
            y(i) + 8.0,
            LANE - 18.0,
            esc(&a.agent),
            a.n,
            esc(&a.status),
            duration(a.duration_ms)
        );
    }
    // Ticks: one per pixel column of a lane, with the count of its messages.
    let mut ticks: BTreeMap<(usize, i64), (u64, u64, u64)> = BTreeMap::new();
    let mut at: BTreeMap<u64, (usize, f64)> = BTreeMap::new();
    for m in &r.messages {
        let (Some(&i), Some(t)) = (lane.get(m.from.as_str()), millis(&m.at)) else {
            continue;
        };
        let col = x(t).round() as i64;
        let e = ticks.entry((i, col)).or_insert((0, m.id, m.id));
        e.0 += 1;
        e.2 = m.id;
        at.insert(m.id, (i, x(t)));
    }
    for ((i, col), (count, first, last)) in &ticks {
        let title = match count {
            1 => format!("#{first}"),
            _ => format!("{count} messages, #{first} to #{last}"),
        };
        let _ = write!(
            s,
            "<line class=\"tick\" x1=\"{col}\" x2=\"{col}\" y1=\"{:.1}\" y2=\"{:.1}\">\
             <title>{title}</title></line>",
            y(*i) + 3.0,
            y(*i) + LANE - 5.0
        );
    }
    // Arrows: from the message to the start of the attempt it woke.
    let start_of: BTreeMap<(&str, u64), i64> = r
        .attempts
        .iter()
        .map(|a| ((a.agent.as_str(), a.n), a.start_ms))
        .collect();
    let mut drawn = 0;
    let mut left = 0;
    for w in &r.wakes {
        let (Some(&(i, x0)), Some(&j), Some(&t)) = (
            at.get(&w.entry),
            lane.get(w.to.as_str()),
            start_of.get(&(w.to.as_str(), w.attempt)),
        ) else {
            continue;
        };
        if drawn == MAX_ARROWS {
            left += 1;
            continue;
        }
        drawn += 1;
        let (y0, y1) = (y(i) + LANE / 2.0, y(j) + LANE / 2.0);
        let _ = write!(
            s,
            "<line class=\"wake\" x1=\"{x0:.1}\" y1=\"{y0:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" \
             marker-end=\"url(#arrow)\"><title>#{} from {} woke {} #{}</title></line>",
            x(t),
            if y1 > y0 { y1 - 8.0 } else { y1 + 8.0 },
            w.entry,
            esc(&w.from),
            esc(&w.to),
            w.attempt
        );
    }
    s.push_str("</svg>");
    (s, left)
}

/// The width of an idle time cut out of the timeline.
const BREAK: f64 = 14.0;

/// A stretch of activity on the timeline: its times, and where it is drawn.
struct Segment {
    start: i64,
    end: i64,
    x0: f64,
    w: f64,
}

/// Where a time is drawn: the stretches of activity (attempts and messages) side by side,
/// the idle times between them longer than a twentieth of the whole (and than 2 s) cut out,
/// so that two runs an hour apart are both seen. A stretch is as wide as its share of the
/// time, half of the width being shared evenly.
struct Scale {
    segs: Vec<Segment>,
}

impl Scale {
    fn new(r: &Report, start: i64, end: i64) -> Scale {
        let mut spans: Vec<(i64, i64)> = r
            .attempts
            .iter()
            .map(|a| (a.start_ms, a.start_ms + a.duration_ms as i64))
            .chain(
                r.messages
                    .iter()
                    .filter_map(|m| millis(&m.at).map(|t| (t, t))),
            )
            .chain([(start, start), (end, end)])
            .collect();
        spans.sort_unstable();
        let gap = ((end - start) / 20).max(2000);
        let mut merged: Vec<(i64, i64)> = Vec::new();
        for (a, b) in spans {
            match merged.last_mut() {
                Some(last) if a <= last.1 + gap => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let n = merged.len() as f64;
        let room = (RIGHT - LEFT) - (n - 1.0) * BREAK;
        let total: f64 = merged.iter().map(|(a, b)| (b - a).max(1) as f64).sum();
        let mut x0 = LEFT;
        let mut segs = Vec::with_capacity(merged.len());
        for (a, b) in merged {
            let w = room * (0.5 / n + 0.5 * (b - a).max(1) as f64 / total);
            segs.push(Segment {
                start: a,
                end: b,
                x0,
                w,
            });
            x0 += w + BREAK;
        }
        Scale { segs }
    }

    /// The x of time `t`: in its stretch, or at the end of the stretch before it.
    fn x(&self, t: i64) -> f64 {
        let i = self
            .segs
            .partition_point(|s| s.start <= t)
            .saturating_sub(1);
        let s = &self.segs[i];
        let along = (t.clamp(s.start, s.end) - s.start) as f64 / (s.end - s.start).max(1) as f64;
        s.x0 + along * s.w
    }
}
