//! The pinned overhead benchmark's outside programs: nginx as the upstream none of the
//! gateways wrote, wrk as the closed-loop load generator, and Portkey's gateway, each
//! from `scripts/peers.sh` (installed under `target/peers` without root); the parse of
//! the one line `scripts/gateway-pinned/wrk.lua` prints; and whether `taskset` can pin.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::process::{Launch, Server, http_get_ok};
use crate::peers::server::peers_script;

/// The core the gateways run on (`taskset -c 0`).
pub const GATEWAY_CORE: usize = 0;
/// The core nginx and the load generators run on (`taskset -c 1`).
pub const LOAD_CORE: usize = 1;

/// `scripts/gateway-pinned/FILE` in this checkout.
pub fn pinned_file(file: &str) -> PathBuf {
    peers_script()
        .parent()
        .map_or_else(|| PathBuf::from("scripts"), Path::to_path_buf)
        .join("gateway-pinned")
        .join(file)
}

/// Whether `taskset -c 0,1 true` runs (the tool is there and both cores are allowed).
pub fn taskset_works() -> bool {
    Command::new("taskset")
        .args(["-c", "0,1", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What `scripts/peers.sh NAME` prints (a binary or entry point), installing it if
/// missing; an error naming what failed.
pub fn peer(name: &str) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(peers_script())
        .arg(name)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("scripts/peers.sh {name}: {e}"))?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || path.is_empty() || !Path::new(&path).exists() {
        return Err(format!("`scripts/peers.sh {name}` failed ({})", out.status));
    }
    Ok(path)
}

/// The first line a program prints (stdout, else stderr) for `arg` (`-v`), trimmed.
pub fn version(binary: &str, arg: &str) -> String {
    Command::new(binary)
        .arg(arg)
        .stdin(Stdio::null())
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).to_string()
                + &String::from_utf8_lossy(&o.stderr);
            text.lines()
                .find(|l| !l.trim().is_empty())
                .map(str::to_owned)
        })
        .map_or_else(|| "unknown".to_owned(), |l| l.trim().to_owned())
}

/// A free loopback port (bound, then released).
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// Waits up to `secs` for `GET path` on `port` to answer 200; the server, or an error
/// (the process stopped, with what it wrote to `log` if any).
fn wait_ready(
    mut server: Server,
    port: u16,
    path: &str,
    secs: u64,
    log: &Path,
) -> Result<Server, String> {
    let deadline = tollgate::clock::now() + Duration::from_secs(secs);
    while tollgate::clock::now() < deadline {
        if server.exited() {
            let said = std::fs::read_to_string(log).unwrap_or_default();
            let tail: String = said.lines().rev().take(3).collect::<Vec<_>>().join(" / ");
            return Err(format!("{} exited at start: {tail}", server.name));
        }
        if http_get_ok(port, path) {
            return Ok(server);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("{} did not answer in {secs} s", server.name))
}

/// nginx's config: `template` (`scripts/gateway-pinned/nginx.conf.in`) with `PREFIX`
/// and `PORT` replaced.
pub fn nginx_config(template: &str, prefix: &Path, port: u16) -> String {
    template
        .replace("PREFIX", &prefix.display().to_string())
        .replace("PORT", &port.to_string())
}

/// Starts nginx (`binary`, the wrapper `peers.sh nginx` prints) with the pinned config
/// under `dir/nginx` on a free port, as `launch` says; its [`Server`] (`url`:
/// `http://127.0.0.1:PORT`, the two routes `/plain/v1/…` and `/stream/v1/…` under it).
pub fn start_nginx(binary: &str, dir: &Path, launch: &Launch) -> Result<Server, String> {
    let prefix = dir.join("nginx");
    for sub in ["logs", "tmp"] {
        std::fs::create_dir_all(prefix.join(sub)).map_err(|e| e.to_string())?;
    }
    let template = std::fs::read_to_string(pinned_file("nginx.conf.in"))
        .map_err(|e| format!("scripts/gateway-pinned/nginx.conf.in: {e}"))?;
    let port = free_port()?;
    let conf = prefix.join("nginx.conf");
    std::fs::write(&conf, nginx_config(&template, &prefix, port)).map_err(|e| e.to_string())?;
    let log = prefix.join("logs").join("stderr.log");
    let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let child = launch
        .command(binary)
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(|e| e.to_string())?)
        .stderr(out)
        .spawn()
        .map_err(|e| format!("nginx: {e}"))?;
    let server = Server::new("nginx", format!("http://127.0.0.1:{port}"), child);
    // nginx answers GET on the POST routes too (`return 200`).
    wait_ready(server, port, "/plain/v1/chat/completions", 20, &log)
}

/// Starts Portkey's gateway (`node ENTRY --port=N --headless`, `entry` from `peers.sh
/// portkey`) as `launch` says, and waits until `GET /` answers (up to a minute).
pub fn start_portkey(entry: &str, dir: &Path, launch: &Launch) -> Result<Server, String> {
    let port = free_port()?;
    let log = dir.join("portkey.log");
    let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let child = launch
        .command("node")
        .arg(entry)
        .arg(format!("--port={port}"))
        .arg("--headless")
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(|e| e.to_string())?)
        .stderr(out)
        .spawn()
        .map_err(|e| format!("node {entry}: {e}"))?;
    let server = Server::new("Portkey", format!("http://127.0.0.1:{port}"), child);
    wait_ready(server, port, "/", 60, &log)
}

/// The summary `wrk.lua` prints at the end of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Wrk {
    /// Responses read (any status).
    pub requests: u64,
    /// The run's length, µs.
    pub duration_us: u64,
    /// Responses not 2xx/3xx.
    pub non2xx: u64,
    /// Socket errors: connect, read, write, timeout.
    pub connect: u64,
    /// Read errors.
    pub read: u64,
    /// Write errors.
    pub write: u64,
    /// Requests timed out.
    pub timeout: u64,
    /// Latency percentiles, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p999_us: u64,
}

impl Wrk {
    /// Responses that were 2xx (or 3xx).
    pub fn answered(&self) -> u64 {
        self.requests.saturating_sub(self.non2xx)
    }

    /// Non-2xx responses and socket errors.
    pub fn errors(&self) -> u64 {
        self.non2xx + self.connect + self.read + self.write + self.timeout
    }

    /// Answered requests per second.
    pub fn rate(&self) -> f64 {
        self.answered() as f64 / (self.duration_us.max(1) as f64 / 1e6)
    }
}

/// The `WRK requests=… p999_us=…` line in wrk's output, if there is one with every field.
pub fn parse_wrk(output: &str) -> Option<Wrk> {
    let line = tagged_line(output, "WRK")?;
    let get = |k: &str| field(line, k);
    Some(Wrk {
        requests: get("requests")?,
        duration_us: get("duration_us")?,
        non2xx: get("non2xx")?,
        connect: get("connect")?,
        read: get("read")?,
        write: get("write")?,
        timeout: get("timeout")?,
        p50_us: get("p50_us")?,
        p99_us: get("p99_us")?,
        p999_us: get("p999_us")?,
    })
}

/// The rest of the last line of `output` that starts with `tag` and a space.
pub fn tagged_line<'a>(output: &'a str, tag: &str) -> Option<&'a str> {
    output
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(tag)?.strip_prefix(' '))
}

/// The number after `key=` in a line of space-separated `key=value` pairs.
pub fn field(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))?
        .parse()
        .ok()
}

/// One wrk run: `wrk -t1 -cN -dSECONDS --latency -s SCRIPT URL`.
#[derive(Debug, Clone)]
pub struct WrkRun<'a> {
    /// The wrapper `peers.sh wrk` prints.
    pub wrk: &'a str,
    /// The Lua script (`wrk.lua`, or it followed by `portkey.lua`).
    pub script: &'a Path,
    /// The full URL (`…/v1/chat/completions`).
    pub url: &'a str,
    /// Connections (`-c`), each a closed-loop caller.
    pub connections: usize,
    /// Seconds (`-d`).
    pub seconds: u64,
    /// `WRK_MODEL`.
    pub model: &'a str,
    /// `WRK_STREAM=1`.
    pub stream: bool,
    /// `WRK_HOST` (Portkey's custom host), if any.
    pub host: Option<&'a str>,
    /// Pinning.
    pub launch: &'a Launch,
}

/// Runs wrk and parses its summary line.
pub fn run_wrk(run: &WrkRun<'_>) -> Result<Wrk, String> {
    let mut command = run.launch.command(run.wrk);
    command
        .args(["-t1", &format!("-c{}", run.connections.max(1))])
        .arg(format!("-d{}s", run.seconds.max(1)))
        .args(["--timeout", "10s", "--latency", "-s"])
        .arg(run.script)
        .arg(run.url)
        .env("WRK_MODEL", run.model)
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    if run.stream {
        command.env("WRK_STREAM", "1");
    }
    if let Some(host) = run.host {
        command.env("WRK_HOST", host);
    }
    let out = command.output().map_err(|e| format!("wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_wrk(&text).ok_or_else(|| {
        format!(
            "wrk printed no summary ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_summary_parses_and_a_partial_one_does_not() {
        let out = "Running 1s test\n  1 threads\nRequests/sec: 1\n\
                   WRK requests=12608 duration_us=1001332 non2xx=8 connect=1 read=2 write=3 timeout=4 p50_us=158 p99_us=4199 p999_us=11107\n";
        let w = parse_wrk(out).unwrap();
        assert_eq!(w.requests, 12_608);
        assert_eq!(w.answered(), 12_600);
        assert_eq!(w.errors(), 18);
        assert_eq!((w.p50_us, w.p99_us, w.p999_us), (158, 4199, 11_107));
        assert!((w.rate() - 12_600.0 / 1.001_332).abs() < 1e-6);
        assert_eq!(parse_wrk("WRK requests=1 duration_us=2"), None);
        assert_eq!(parse_wrk("no summary"), None);
    }

    #[test]
    fn the_nginx_template_gets_its_prefix_and_port() {
        let conf = nginx_config(
            "pid PREFIX/nginx.pid;\nlisten 127.0.0.1:PORT;",
            Path::new("/s"),
            81,
        );
        assert_eq!(conf, "pid /s/nginx.pid;\nlisten 127.0.0.1:81;");
    }
}
