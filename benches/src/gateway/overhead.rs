//! The gateway's overhead, pinned: nginx (an upstream none of the gateways wrote, a
//! canned completion and a canned SSE stream) on core 1 with the load generators, each
//! gateway alone on core 0 — `tollgate serve` (one tokio worker thread), Portkey's
//! gateway (Node), LiteLLM's proxy (one worker) — and `direct`, the load straight at
//! nginx. Closed loop: wrk at concurrency 1 to 256; open loop: a
//! constant offered rate, latency from each request's due time ([`super::open_loop`]).
//! The tables and target lines are in [`super::overhead_report`].

use std::path::{Path, PathBuf};

use super::open_loop::{self, OpenLoop, Spec};
use super::pinned::{
    GATEWAY_CORE, LOAD_CORE, Wrk, WrkRun, peer, pinned_file, run_wrk, start_nginx, start_portkey,
    taskset_works, version,
};
use super::process::{
    Launch, Server, catalog, litellm_binary, litellm_config, start_litellm_with,
    start_tollgate_with,
};

/// The non-streamed model id (nginx's `/plain` route).
pub const MODEL: &str = "fast";
/// The streamed model id (nginx's `/stream` route).
pub const STREAM_MODEL: &str = "fast-stream";
/// The path name of the load straight at nginx.
pub const DIRECT: &str = "direct";
/// The path name of tollgate's gateway.
pub const TOLLGATE: &str = "tollgate serve";

/// What the benchmark runs.
#[derive(Debug, Clone, Copy)]
pub struct OverheadConfig {
    /// Closed-loop concurrencies, not streamed.
    pub concurrency: &'static [usize],
    /// Closed-loop concurrencies, streamed.
    pub stream_concurrency: &'static [usize],
    /// Unmeasured wrk seconds before each cell (0: none).
    pub warmup_secs: u64,
    /// Measured wrk seconds per cell.
    pub seconds: u64,
    /// Open loop: requests offered per second.
    pub open_rate: u64,
    /// Open loop: seconds offered (0: no open loop).
    pub open_secs: f64,
    /// Open loop: keep-alive connections.
    pub open_connections: usize,
    /// Whether Portkey and LiteLLM are measured too.
    pub peers: bool,
    /// The open-loop driver as a child process of this binary (the bench); `false`: on a
    /// thread of this process (a test binary cannot be the child).
    pub open_loop_child: bool,
}

impl OverheadConfig {
    /// The benchmark as `cargo xtask bench` runs it.
    pub const FULL: OverheadConfig = OverheadConfig {
        concurrency: &[1, 16, 64, 256],
        stream_concurrency: &[1, 16],
        warmup_secs: 1,
        seconds: 4,
        open_rate: 5000,
        open_secs: 3.0,
        open_connections: 64,
        peers: true,
        open_loop_child: true,
    };

    /// A reduced run for a test: `direct` and `tollgate serve` only, a second a cell.
    pub const TINY: OverheadConfig = OverheadConfig {
        concurrency: &[1],
        stream_concurrency: &[1],
        warmup_secs: 0,
        seconds: 1,
        open_rate: 500,
        open_secs: 0.5,
        open_connections: 4,
        peers: false,
        open_loop_child: false,
    };
}

/// One closed-loop cell.
#[derive(Debug, Clone)]
pub struct OverheadRow {
    /// Connections (callers), each sending its next request when the last is answered.
    pub concurrency: usize,
    /// `direct`, `tollgate serve`, `Portkey`, `LiteLLM`.
    pub path: String,
    /// Streamed (SSE) or not.
    pub streamed: bool,
    /// What wrk measured.
    pub wrk: Wrk,
    /// CPU of the gateway's process tree per answered request, µs (`None`: direct).
    pub cpu_us: Option<f64>,
    /// Of which system (kernel) time, µs per answered request.
    pub system_us: Option<f64>,
    /// Peak RSS of the gateway's process tree so far, bytes.
    pub peak_rss: Option<u64>,
}

/// One open-loop run.
#[derive(Debug, Clone)]
pub struct OpenRow {
    /// The path.
    pub path: String,
    /// What the driver measured.
    pub result: OpenLoop,
}

/// Everything one run gives the report.
#[derive(Debug, Clone, Default)]
pub struct Overhead {
    /// The closed-loop cells.
    pub rows: Vec<OverheadRow>,
    /// The open-loop runs.
    pub open: Vec<OpenRow>,
    /// Requests offered per second in the open loop.
    pub open_rate: u64,
    /// What was not measured, and why.
    pub problems: Vec<String>,
    /// Versions and settings for the notes.
    pub facts: Vec<String>,
    /// Whether `taskset` pinned the processes.
    pub pinned: bool,
}

/// A path under test: its name, its URLs, the gateway process (none for `direct`).
#[derive(Debug)]
struct Target {
    name: String,
    plain: String,
    stream: String,
    server: Option<Server>,
    /// Portkey's custom hosts (plain, stream): its wrk script and headers.
    portkey: Option<(String, String)>,
}

/// Runs every path; `tollgate` is the release binary, `dir` a scratch directory.
pub fn run(c: &OverheadConfig, tollgate: &Path, dir: &Path) -> Overhead {
    let mut out = Overhead {
        pinned: taskset_works(),
        open_rate: c.open_rate,
        ..Overhead::default()
    };
    let core = |n| out.pinned.then_some(n);
    let load = Launch {
        env: Vec::new(),
        core: core(LOAD_CORE),
    };
    let gateway = Launch {
        env: Vec::new(),
        core: core(GATEWAY_CORE),
    };
    let (nginx_bin, wrk) = match (peer("nginx"), peer("wrk")) {
        (Ok(n), Ok(w)) => (n, w),
        (n, w) => {
            let e = n.err().or(w.err()).unwrap_or_default();
            out.problems.push(format!("any path: {e}"));
            return out;
        }
    };
    out.facts.push(format!(
        "nginx: `{}`; wrk: `{}` (Debian's, `scripts/peers.sh nginx`, `wrk`).",
        version(&nginx_bin, "-v"),
        version(&wrk, "-v")
    ));
    let nginx = match start_nginx(&nginx_bin, dir, &load) {
        Ok(s) => s,
        Err(e) => {
            out.problems.push(format!("any path: {e}"));
            return out;
        }
    };
    let mut targets = vec![Target {
        name: DIRECT.into(),
        plain: format!("{}/plain/v1/chat/completions", nginx.url),
        stream: format!("{}/stream/v1/chat/completions", nginx.url),
        server: None,
        portkey: None,
    }];
    match start_gateway(tollgate, dir, &nginx.url, &gateway) {
        Ok(t) => targets.push(t),
        Err(e) => out.problems.push(e),
    }
    if c.peers {
        match start_portkey_target(dir, &nginx.url, &gateway) {
            Ok(t) => targets.push(t),
            Err(e) => out.problems.push(format!("Portkey: {e}")),
        }
        match start_litellm_target(dir, &nginx.url, &gateway) {
            Ok(t) => targets.push(t),
            Err(e) => out.problems.push(format!("LiteLLM: {e}")),
        }
    }
    let portkey_script = dir.join("wrk-portkey.lua");
    let joined = std::fs::read_to_string(pinned_file("wrk.lua")).and_then(|a| {
        let b = std::fs::read_to_string(pinned_file("portkey.lua"))?;
        std::fs::write(&portkey_script, a + "\n" + &b)
    });
    if let Err(e) = joined {
        out.problems.push(format!("Portkey's wrk script: {e}"));
    }
    let plain_script = pinned_file("wrk.lua");
    let cells = c
        .concurrency
        .iter()
        .map(|n| (*n, false))
        .chain(c.stream_concurrency.iter().map(|n| (*n, true)));
    for (concurrency, streamed) in cells {
        for t in &targets {
            let script = if t.portkey.is_some() {
                &portkey_script
            } else {
                &plain_script
            };
            let host = t
                .portkey
                .as_ref()
                .map(|(p, s)| if streamed { s.as_str() } else { p.as_str() });
            let run = WrkRun {
                wrk: &wrk,
                script,
                url: if streamed { &t.stream } else { &t.plain },
                connections: concurrency,
                seconds: c.seconds,
                model: if streamed { STREAM_MODEL } else { MODEL },
                stream: streamed,
                host,
                launch: &load,
            };
            match closed_loop(&run, c.warmup_secs, t.server.as_ref()) {
                Ok((wrk, cpu_us, system_us)) => {
                    eprintln!(
                        "gateway overhead: c={concurrency} stream={streamed} {}: {} ok, {} errors, {:.0}/s",
                        t.name,
                        wrk.answered(),
                        wrk.errors(),
                        wrk.rate()
                    );
                    out.rows.push(OverheadRow {
                        concurrency,
                        path: t.name.clone(),
                        streamed,
                        wrk,
                        cpu_us,
                        system_us,
                        peak_rss: t.server.as_ref().map(Server::peak_rss),
                    });
                }
                Err(e) => out.problems.push(format!(
                    "{} at concurrency {concurrency}{}: {e}",
                    t.name,
                    if streamed { ", streamed" } else { "" }
                )),
            }
        }
    }
    if c.open_secs > 0.0 {
        open_loops(c, &targets, &load, &mut out);
    }
    drop(targets);
    drop(nginx);
    out
}

/// A warm-up run (unmeasured), then the measured run with the gateway's CPU time over
/// it per answered request (all, and system alone), µs.
fn closed_loop(
    run: &WrkRun<'_>,
    warmup_secs: u64,
    server: Option<&Server>,
) -> Result<(Wrk, Option<f64>, Option<f64>), String> {
    if warmup_secs > 0 {
        run_wrk(&WrkRun {
            seconds: warmup_secs,
            ..run.clone()
        })?;
    }
    let before = server.map(|s| (s.cpu(), s.system_cpu()));
    let wrk = run_wrk(run)?;
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / wrk.answered().max(1) as f64;
    let spent = server.zip(before).map(|(s, (cpu, system))| {
        (
            per(s.cpu().saturating_sub(cpu)),
            per(s.system_cpu().saturating_sub(system)),
        )
    });
    Ok((wrk, spent.map(|x| x.0), spent.map(|x| x.1)))
}

/// The highest answered rate of `path` in the closed loop, not streamed (0 if none).
pub fn best_rate(rows: &[OverheadRow], path: &str) -> f64 {
    rows.iter()
        .filter(|r| r.path == path && !r.streamed)
        .map(|r| r.wrk.rate())
        .fold(0.0, f64::max)
}

/// The open loop: `direct` and `tollgate serve`, and a peer only if its best closed-loop
/// rate (not streamed) was above the offered rate (else a note with the figure).
fn open_loops(c: &OverheadConfig, targets: &[Target], load: &Launch, out: &mut Overhead) {
    let exe = std::env::current_exe().ok();
    for t in targets {
        let best = best_rate(&out.rows, &t.name);
        if t.name != DIRECT && t.name != TOLLGATE && best <= c.open_rate as f64 {
            out.problems.push(format!(
                "{} in the open loop: its best closed-loop rate on one core, {best:.0}/s, is not above the {}/s offered",
                t.name, c.open_rate
            ));
            continue;
        }
        let spec = Spec {
            url: t.plain.clone(),
            model: MODEL.into(),
            rate: c.open_rate,
            seconds: c.open_secs,
            connections: c.open_connections,
            portkey_host: t.portkey.as_ref().map(|(p, _)| p.clone()),
        };
        let result = match (&exe, c.open_loop_child) {
            (Some(exe), true) => open_loop::run_child(exe, &spec, load),
            _ => std::thread::spawn(move || open_loop::drive(&spec))
                .join()
                .map_err(|_| "the open-loop driver panicked".to_owned()),
        };
        match result {
            Ok(result) => {
                eprintln!(
                    "gateway overhead: open loop {}: {} of {} answered, p99 {} µs",
                    t.name, result.answered, result.offered, result.p99_us
                );
                out.open.push(OpenRow {
                    path: t.name.clone(),
                    result,
                });
            }
            Err(e) => out
                .problems
                .push(format!("{} in the open loop: {e}", t.name)),
        }
    }
}

/// `tollgate serve` with `TOKIO_WORKER_THREADS=1`: a catalog of two `openai-compatible`
/// models, `fast` on nginx's `/plain` and `fast-stream` on `/stream`, no limits, no keys.
fn start_gateway(
    binary: &Path,
    dir: &Path,
    nginx: &str,
    launch: &Launch,
) -> Result<Target, String> {
    let path = dir.join("pinned-catalog.toml");
    let text = catalog(MODEL, &format!("{nginx}/plain"), "")
        + &catalog(STREAM_MODEL, &format!("{nginx}/stream"), "");
    std::fs::write(&path, text).map_err(|e| format!("{TOLLGATE}: {e}"))?;
    let launch = Launch {
        env: vec![("TOKIO_WORKER_THREADS".into(), "1".into())],
        ..launch.clone()
    };
    let global = ["--catalog".to_owned(), path.display().to_string()];
    let server = start_tollgate_with(TOLLGATE, binary, &global, &launch)?;
    Ok(Target {
        name: TOLLGATE.into(),
        plain: format!("{}/v1/chat/completions", server.url),
        stream: format!("{}/v1/chat/completions", server.url),
        server: Some(server),
        portkey: None,
    })
}

fn start_portkey_target(dir: &Path, nginx: &str, launch: &Launch) -> Result<Target, String> {
    let entry = peer("portkey")?;
    let server = start_portkey(&entry, dir, launch)?;
    Ok(Target {
        name: "Portkey".into(),
        plain: format!("{}/v1/chat/completions", server.url),
        stream: format!("{}/v1/chat/completions", server.url),
        server: Some(server),
        portkey: Some((format!("{nginx}/plain/v1"), format!("{nginx}/stream/v1"))),
    })
}

/// LiteLLM's proxy, one worker: `fast` at nginx's `/plain/v1`, `fast-stream` at
/// `/stream/v1` (a second deployment in the model list).
fn start_litellm_target(dir: &Path, nginx: &str, launch: &Launch) -> Result<Target, String> {
    let bin = litellm_binary()?;
    let second = format!(
        "  - model_name: {STREAM_MODEL}\n    litellm_params:\n      model: openai/{STREAM_MODEL}\n      \
         api_base: {nginx}/stream/v1\n      api_key: key-{STREAM_MODEL}\n"
    );
    let config: PathBuf = dir.join("pinned-litellm.yaml");
    std::fs::write(
        &config,
        litellm_config(MODEL, &format!("{nginx}/plain"), &second, ""),
    )
    .map_err(|e| e.to_string())?;
    let log = dir.join("pinned-litellm.log");
    let server = start_litellm_with("LiteLLM", &bin, &config, 1, &log, launch)?;
    Ok(Target {
        name: "LiteLLM".into(),
        plain: format!("{}/v1/chat/completions", server.url),
        stream: format!("{}/v1/chat/completions", server.url),
        server: Some(server),
        portkey: None,
    })
}
