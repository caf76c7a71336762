//! The pinned overhead benchmark's report: section 8 (the closed-loop table, the target
//! lines, the notes) and section 8a (the open loop), from an [`Overhead`]. The target
//! lines are a pure function of the rows ([`targets`]).

use super::overhead::{
    DIRECT, OpenRow, Overhead, OverheadConfig, OverheadRow, TOLLGATE, best_rate,
};
use crate::report::{Section, Table, num};

/// `tollgate serve`'s CPU per request allowed at concurrency 1, µs.
pub const TARGET_CPU_C1_US: f64 = 80.0;
/// … at concurrency 16 and up (each of 16, 64, 256), µs.
pub const TARGET_CPU_US: f64 = 40.0;
/// … streamed, at concurrency 16, µs.
pub const TARGET_CPU_STREAM_US: f64 = 60.0;
/// Added p99 allowed in the open loop, µs.
pub const TARGET_OPEN_ADDED_P99_US: f64 = 1000.0;
/// The non-streamed concurrencies held to [`TARGET_CPU_US`].
pub const HIGH_CONCURRENCY: [usize; 3] = [16, 64, 256];

fn verdict(ok: bool) -> &'static str {
    if ok { "**met**" } else { "**missed**" }
}

fn find<'a>(
    rows: &'a [OverheadRow],
    path: &str,
    concurrency: usize,
    streamed: bool,
) -> Option<&'a OverheadRow> {
    rows.iter()
        .find(|r| r.path == path && r.concurrency == concurrency && r.streamed == streamed)
}

/// The target lines: `tollgate serve`'s CPU per request at concurrency 1, at each of 16,
/// 64 and 256, and streamed at 16; its added p99 in the open loop. A cell not measured
/// says so (neither met nor missed).
pub fn targets(rows: &[OverheadRow], open: &[OpenRow], rate: u64) -> Vec<String> {
    let mut out = Vec::new();
    let cpu = |concurrency, streamed, limit: f64| {
        let what = if streamed {
            format!("streamed at concurrency {concurrency}")
        } else {
            format!("at concurrency {concurrency}")
        };
        match find(rows, TOLLGATE, concurrency, streamed).and_then(|r| r.cpu_us) {
            Some(us) => format!(
                "Target `tollgate serve` CPU ≤ {limit:.0} µs/req {what}: {us:.1} µs, {}.",
                verdict(us <= limit)
            ),
            None => {
                format!("Target `tollgate serve` CPU ≤ {limit:.0} µs/req {what}: not measured.")
            }
        }
    };
    out.push(cpu(1, false, TARGET_CPU_C1_US));
    for c in HIGH_CONCURRENCY {
        out.push(cpu(c, false, TARGET_CPU_US));
    }
    out.push(cpu(16, true, TARGET_CPU_STREAM_US));
    let p99 = |path: &str| {
        open.iter()
            .find(|o| o.path == path && o.result.answered > 0)
            .map(|o| o.result.p99_us as f64)
    };
    let head = format!(
        "Target added p99 ≤ {:.0} ms at {} req/s open loop (`tollgate serve` over `direct`)",
        TARGET_OPEN_ADDED_P99_US / 1000.0,
        group(rate)
    );
    out.push(match (p99(TOLLGATE), p99(DIRECT)) {
        (Some(t), Some(d)) => format!(
            "{head}: {:.0} µs, {}.",
            t - d,
            verdict(t - d <= TARGET_OPEN_ADDED_P99_US)
        ),
        _ => format!("{head}: not measured."),
    });
    out
}

/// 5000 as `5,000`.
fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn dash() -> String {
    "–".to_owned()
}

/// Sections 8 (closed loop, targets, notes) and 8a (open loop).
pub fn sections(o: &Overhead, c: &OverheadConfig) -> Vec<Section> {
    vec![closed_section(o, c), open_section(o, c)]
}

fn closed_section(o: &Overhead, c: &OverheadConfig) -> Section {
    let mut table = Table::new(&[
        "concurrency",
        "path",
        "streamed",
        "answered",
        "non-2xx/errors",
        "req/s",
        "p50 µs",
        "p99 µs",
        "added p50 µs",
        "added p99 µs",
        "gateway CPU µs/req",
        "peak RSS MiB",
    ]);
    for r in &o.rows {
        let direct = find(&o.rows, DIRECT, r.concurrency, r.streamed);
        let added = |f: fn(&OverheadRow) -> u64| match direct {
            Some(d) if r.path != DIRECT => num(f(r) as f64 - f(d) as f64, 0),
            _ => dash(),
        };
        table.row(vec![
            r.concurrency.to_string(),
            r.path.clone(),
            if r.streamed { "yes" } else { "no" }.into(),
            r.wrk.answered().to_string(),
            r.wrk.errors().to_string(),
            num(r.wrk.rate(), 0),
            r.wrk.p50_us.to_string(),
            r.wrk.p99_us.to_string(),
            added(|r| r.wrk.p50_us),
            added(|r| r.wrk.p99_us),
            r.cpu_us.map_or_else(dash, |x| num(x, 1)),
            r.peak_rss
                .map_or_else(dash, |b| num(b as f64 / f64::from(1 << 20), 1)),
        ]);
    }
    let mut notes = targets(&o.rows, &o.open, c.open_rate);
    notes.extend(system_share(&o.rows));
    notes.extend([
        if o.pinned {
            "Pinning: each gateway runs alone on core 0 (`taskset -c 0`, inherited by its child processes), nginx, wrk and the open-loop driver on core 1 (`taskset -c 1`); so the gateway's CPU per request is the time of one core, and the load generator does not compete with it. Another build or benchmark may share the machine: the figures are indicative.".to_owned()
        } else {
            "Pinning: **not done** — `taskset` is missing or cannot pin to cores 0 and 1 here, so every process ran unpinned and the gateway competed with nginx and wrk for both cores.".to_owned()
        },
        "Upstream: nginx (`scripts/gateway-pinned/nginx.conf.in`: one worker process, no access log), a canned chat completion at `/plain/v1/chat/completions` and a canned SSE stream (four chunks, usage, `[DONE]`) at `/stream/v1/chat/completions`. No gateway wrote it; none of them paces it (no limits in any catalog).".to_owned(),
        format!(
            "Closed loop: `wrk -t1 -cN -d{}s --timeout 10s --latency -s scripts/gateway-pinned/wrk.lua URL` (for Portkey, wrk.lua followed by portkey.lua, which adds `x-portkey-provider: openai` and `x-portkey-custom-host`), each of the N connections sending its next request when the last is answered; before each cell an unmeasured {} s wrk run. `direct` is wrk straight at nginx.",
            c.seconds, c.warmup_secs
        ),
        "Columns: answered: 2xx responses in the measured run; non-2xx/errors: non-2xx responses plus wrk's connect, read, write and timeout errors; req/s: answered over wrk's run time; p50/p99 µs: wrk's latency percentiles (send to whole answer read, over all responses); added p50/p99 µs: that percentile minus `direct`'s at the same concurrency and stream mode, in the same run (so it includes the extra loopback hop); gateway CPU µs/req: user + system time of the gateway's process tree (`/proc/PID/stat`, 10 ms ticks) over the measured run divided by its answered requests; peak RSS MiB: `VmHWM` summed over the gateway's process tree so far in the run (it only grows).".to_owned(),
        "`tollgate serve`: the release binary, `TOKIO_WORKER_THREADS=1` (one tokio worker thread), a catalog of two `openai-compatible` models, `fast` on `/plain` and `fast-stream` on `/stream`, no limits, no keys. Portkey: `@portkey-ai/gateway` 1.15.2 with `@hono/node-server` 1.13.8 (`scripts/peers.sh portkey`), `node build/start-server.js --port=N --headless`. LiteLLM: its proxy, litellm 1.81.16 (`scripts/peers.sh litellm`), `--num_workers 1`, two `openai/` deployments, callbacks, spend and error logs, telemetry and retries off.".to_owned(),
    ]);
    notes.extend(o.facts.iter().cloned());
    for p in &o.problems {
        notes.push(format!("Not measured: {p}."));
    }
    Section {
        title: "8. The gateway's overhead (`tollgate serve` beside Portkey's gateway and LiteLLM's proxy, pinned, over nginx)".into(),
        intro: vec![format!(
            "The same small chat request (OpenAI `/v1/chat/completions`) from wrk, closed loop, at concurrency {} not streamed and {} streamed: straight to nginx, and through each gateway pinned alone to one core, in front of the same nginx, in one run. Section 8a offers a constant rate instead.",
            list(c.concurrency),
            list(c.stream_concurrency)
        )],
        table,
        notes,
    }
}

/// What share of each gateway's CPU was system (kernel) time, over its cells.
fn system_share(rows: &[OverheadRow]) -> Option<String> {
    let mut paths: Vec<&str> = Vec::new();
    for r in rows {
        if r.cpu_us.is_some() && !paths.contains(&r.path.as_str()) {
            paths.push(&r.path);
        }
    }
    let parts: Vec<String> = paths
        .iter()
        .filter_map(|p| {
            let (mut all, mut system) = (0.0, 0.0);
            for r in rows.iter().filter(|r| r.path == *p) {
                let n = r.wrk.answered() as f64;
                all += r.cpu_us? * n;
                system += r.system_us? * n;
            }
            (all > 0.0).then(|| format!("{p} {:.0}%", 100.0 * system / all))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "System (kernel) time's share of the gateway CPU, over all its cells (weighted by answered requests): {} — the rest is user time.",
            parts.join(", ")
        )
    })
}

fn list(xs: &[usize]) -> String {
    xs.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn open_section(o: &Overhead, c: &OverheadConfig) -> Section {
    let mut table = Table::new(&[
        "path",
        "offered/s",
        "answered",
        "errors",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "added p99 µs",
    ]);
    let direct = o.open.iter().find(|r| r.path == DIRECT);
    for r in &o.open {
        let x = &r.result;
        table.row(vec![
            r.path.clone(),
            group(c.open_rate),
            x.answered.to_string(),
            x.errors.to_string(),
            x.p50_us.to_string(),
            x.p99_us.to_string(),
            x.p999_us.to_string(),
            match direct {
                Some(d) if r.path != DIRECT => num(x.p99_us as f64 - d.result.p99_us as f64, 0),
                _ => dash(),
            },
        ]);
    }
    let mut notes = vec![
        format!(
            "The driver: a child process of the bench binary, on core 1 beside nginx; an OS thread sleeping to each due time hands it to a current-thread tokio runtime, where a task waits for one of {} keep-alive connections (reqwest), sends, reads the whole answer and records answered time minus due time. Before the measured run, {} unmeasured requests open and warm the connections.",
            c.open_connections,
            c.open_connections * 4
        ),
        "Columns: answered: 2xx answers read to the end; errors: the rest (non-2xx, failed, 30 s timeout); p50/p99/p99.9 µs: percentiles of due-to-answered over the answered; added p99 µs: the path's p99 minus `direct`'s.".to_owned(),
    ];
    notes.extend(o.open.iter().filter_map(|r| {
        let best = best_rate(&o.rows, &r.path);
        (r.path != DIRECT && best < c.open_rate as f64).then(|| {
            format!(
                "`{}`'s best closed-loop rate in section 8 was {best:.0}/s, below the {}/s offered: its queue grew for the whole run, so its latencies here are mostly that queue.",
                r.path,
                group(c.open_rate)
            )
        })
    }));
    Section {
        title: format!(
            "8a. The gateway's overhead, open loop at {}/s",
            group(c.open_rate)
        ),
        intro: vec![format!(
            "Requests offered at a constant {}/s for {} s, whatever the answers do, to `direct` (nginx) and through `tollgate serve` (a peer only if its best closed-loop rate in section 8 was above the offered rate), with each request's latency counted from the time it was due, not from when it was sent, so that a queue shows.",
            group(c.open_rate),
            c.open_secs
        )],
        table,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::open_loop::OpenLoop;
    use crate::gateway::pinned::Wrk;

    fn row(concurrency: usize, streamed: bool, cpu: f64) -> OverheadRow {
        OverheadRow {
            concurrency,
            path: TOLLGATE.into(),
            streamed,
            wrk: Wrk::default(),
            cpu_us: Some(cpu),
            system_us: Some(cpu / 2.0),
            peak_rss: Some(1),
        }
    }

    fn open(path: &str, p99_us: u64) -> OpenRow {
        OpenRow {
            path: path.into(),
            result: OpenLoop {
                offered: 10,
                answered: 10,
                p99_us,
                ..OpenLoop::default()
            },
        }
    }

    #[test]
    fn targets_are_met_or_missed_from_the_rows() {
        let rows = [
            row(1, false, 80.0),
            row(16, false, 39.9),
            row(64, false, 40.1),
            row(256, false, 12.0),
            row(16, true, 61.0),
        ];
        let lines = targets(&rows, &[open(DIRECT, 500), open(TOLLGATE, 1400)], 5000);
        assert_eq!(lines.len(), 6);
        let want = [
            ("≤ 80 µs/req at concurrency 1: 80.0", "**met**"),
            ("≤ 40 µs/req at concurrency 16: 39.9", "**met**"),
            ("at concurrency 64: 40.1", "**missed**"),
            ("at concurrency 256: 12.0", "**met**"),
            ("≤ 60 µs/req streamed at concurrency 16: 61.0", "**missed**"),
            (
                "≤ 1 ms at 5,000 req/s open loop (`tollgate serve` over `direct`): 900 µs",
                "**met**",
            ),
        ];
        for (line, (has, verdict)) in lines.iter().zip(want) {
            assert!(line.contains(has) && line.contains(verdict), "{line}");
        }
        let missed = targets(&rows, &[open(DIRECT, 500), open(TOLLGATE, 1501)], 5000);
        assert!(missed[5].contains("1001 µs, **missed**"), "{}", missed[5]);
    }

    #[test]
    fn a_cell_not_measured_is_neither_met_nor_missed() {
        let lines = targets(&[row(1, false, 10.0)], &[open(DIRECT, 500)], 5000);
        assert!(lines[0].contains("**met**"));
        for line in &lines[1..] {
            assert!(line.ends_with("not measured."), "{line}");
        }
    }

    #[test]
    fn the_system_share_is_weighted_by_answered_requests() {
        let mut a = row(1, false, 100.0);
        a.wrk.requests = 300;
        a.system_us = Some(10.0);
        let mut b = row(16, false, 100.0);
        b.wrk.requests = 100;
        b.system_us = Some(50.0);
        let line = system_share(&[a, b]).unwrap();
        assert!(line.contains("tollgate serve 20%"), "{line}");
        assert_eq!(system_share(&[]), None);
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group(5000), "5,000");
        assert_eq!(group(500), "500");
        assert_eq!(group(1_234_567), "1,234,567");
    }
}
