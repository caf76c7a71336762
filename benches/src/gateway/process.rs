//! The servers the gateway benchmark starts as OS processes: `tollgate serve` (the
//! release binary) and LiteLLM's proxy (from `scripts/peers.sh litellm`), each killed
//! when its [`Server`] is dropped, also on a panic; and what `/proc` says about a
//! process tree's CPU time and peak resident memory.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::peers::server::peers_script;

/// A server process this benchmark started, stopped with its descendants on drop.
#[derive(Debug)]
pub struct Server {
    /// What the tables call it.
    pub name: String,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    child: Child,
}

impl Server {
    /// A server from a process this benchmark spawned (stopped with its descendants on
    /// drop), serving at `url`.
    pub fn new(name: &str, url: String, child: Child) -> Server {
        Server {
            name: name.to_owned(),
            url,
            child,
        }
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time (user + system) of the process and its descendants so far.
    pub fn cpu(&self) -> Duration {
        tree(self.pid()).iter().map(|p| cpu_time(*p)).sum()
    }

    /// System CPU time alone (the kernel's work for it: sockets, …) of the process and
    /// its descendants so far.
    pub fn system_cpu(&self) -> Duration {
        tree(self.pid()).iter().map(|p| system_time(*p)).sum()
    }

    /// Peak resident memory (`VmHWM`) summed over the process and its descendants, bytes.
    pub fn peak_rss(&self) -> u64 {
        tree(self.pid()).iter().map(|p| peak_rss(*p)).sum()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM to the process and each of its descendants (LiteLLM's workers), by
        // their ids, then SIGKILL to what still runs after five seconds.
        let pids = tree(self.pid());
        signal(&pids, "TERM");
        let deadline = tollgate::clock::now() + Duration::from_secs(5);
        while tollgate::clock::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_)))
                && pids[1..].iter().all(|p| stat_fields(*p).is_none())
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        signal(&pids[1..], "KILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `kill -s SIGNAL -- PID…` to these (positive) process ids.
fn signal(pids: &[u32], name: &str) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .args(["-s", name, "--"])
        .args(pids.iter().map(u32::to_string))
        .stderr(Stdio::null())
        .status();
}

/// How a server process is launched beyond its arguments: extra environment, and the
/// CPU core it is pinned to (`taskset -c CORE`, inherited by its descendants).
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// Variables set for the process.
    pub env: Vec<(String, String)>,
    /// The core to pin it to; `None`: unpinned.
    pub core: Option<usize>,
}

impl Launch {
    /// `program` as a command: `taskset -c CORE program` when pinned, with the env set.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = match self.core {
            Some(core) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &core.to_string()]).arg(program);
                c
            }
            None => Command::new(program),
        };
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }
}

/// Starts `tollgate GLOBAL… serve --listen 127.0.0.1:0` (`global`: `--catalog F`,
/// `--credentials F`, `--redis URL`) and reads the address it prints (`tollgate serve:
/// listening on http://…`).
pub fn start_tollgate(name: &str, binary: &Path, global: &[String]) -> Result<Server, String> {
    start_tollgate_with(name, binary, global, &Launch::default())
}

/// [`start_tollgate`], launched as `launch` says (environment, pinning).
pub fn start_tollgate_with(
    name: &str,
    binary: &Path,
    global: &[String],
    launch: &Launch,
) -> Result<Server, String> {
    let mut command = launch.command(binary);
    command
        .args(global)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--shutdown-grace-secs",
            "1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command
        .spawn()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let url = rest.split_whitespace().next().unwrap_or("").to_owned();
                let _ = tx.send(url);
            }
        }
    });
    let server = |url| Server {
        name: name.to_owned(),
        url,
        child,
    };
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(url) if url.starts_with("http://") => Ok(server(url)),
        _ => {
            drop(server(String::new()));
            Err(format!("{name}: `tollgate serve` printed no address"))
        }
    }
}

/// The `litellm` binary, installed by `scripts/peers.sh litellm` if missing.
pub fn litellm_binary() -> Result<String, String> {
    let out = Command::new("bash")
        .arg(peers_script())
        .arg("litellm")
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("scripts/peers.sh litellm: {e}"))?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || !Path::new(&path).exists() {
        return Err("scripts/peers.sh litellm failed".into());
    }
    Ok(path)
}

/// Starts LiteLLM's proxy on a free loopback port with `config` and `workers` worker
/// processes, telemetry, the model-cost download and the access log off, and waits until it serves
/// `GET /health/liveliness` (up to two minutes).
pub fn start_litellm(
    name: &str,
    binary: &str,
    config: &Path,
    workers: usize,
    log: &Path,
) -> Result<Server, String> {
    start_litellm_with(name, binary, config, workers, log, &Launch::default())
}

/// [`start_litellm`], launched as `launch` says (environment, pinning).
pub fn start_litellm_with(
    name: &str,
    binary: &str,
    config: &Path,
    workers: usize,
    log: &Path,
    launch: &Launch,
) -> Result<Server, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    // uvicorn's access log (a line per request) off; its keep-alive past a pause.
    let log_config = log.with_extension("logging.json");
    std::fs::write(
        &log_config,
        r#"{"version": 1, "disable_existing_loggers": false, "loggers": {"uvicorn.access": {"level": "WARNING"}}}"#,
    )
    .map_err(|e| e.to_string())?;
    let log = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let mut command = launch.command(binary);
    command
        .arg("--config")
        .arg(config)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--num_workers", &workers.to_string()])
        .arg("--log_config")
        .arg(&log_config)
        .args(["--keepalive_timeout", "300"])
        // No telemetry, no model-cost map from GitHub, no update checks, loopback only.
        .env("LITELLM_TELEMETRY", "False")
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_LOG", "ERROR")
        .env("DISABLE_ADMIN_UI", "True")
        .env("NO_PROXY", "*")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log);
    let child = command.spawn().map_err(|e| format!("{binary}: {e}"))?;
    let mut server = Server {
        name: name.to_owned(),
        url: format!("http://127.0.0.1:{port}"),
        child,
    };
    let deadline = tollgate::clock::now() + Duration::from_secs(120);
    while tollgate::clock::now() < deadline {
        if matches!(server.child.try_wait(), Ok(Some(_))) {
            return Err(format!("{name}: litellm exited at start"));
        }
        if http_get_ok(port, "/health/liveliness") {
            return Ok(server);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(format!("{name}: litellm did not start in 120 s"))
}

/// A catalog serving `model` from the openai-compatible server at `base_url` (no
/// `/v1`), with no limits (`rpm`/`tpm` absent).
pub fn catalog(model: &str, base_url: &str, extra: &str) -> String {
    format!(
        "[models.{model}]\nprovider = \"openai-compatible\"\nname = \"{model}\"\n\
         max_output_tokens = 4096\n{extra}[models.{model}.options]\nbase_url = \"{base_url}\"\n"
    )
}

/// LiteLLM's config: one deployment of `model` at `base_url` (with `/v1`), with `extra`
/// lines in `litellm_params` and `router` lines in `router_settings`; callbacks, spend
/// and error logs, telemetry and retries off, so the figure is the proxy's own work.
pub fn litellm_config(model: &str, base_url: &str, params: &str, router: &str) -> String {
    format!(
        "model_list:\n  - model_name: {model}\n    litellm_params:\n      model: openai/{model}\n      \
         api_base: {base_url}/v1\n      api_key: key-{model}\n{params}\
         litellm_settings:\n  telemetry: false\n  drop_params: true\n  num_retries: 0\n  \
         request_timeout: 120\n  callbacks: []\n  success_callback: []\n  failure_callback: []\n\
         general_settings:\n  disable_spend_logs: true\n  disable_error_logs: true\n\
         router_settings:\n  num_retries: 0\n{router}"
    )
}

/// `tollgate serve` and LiteLLM's proxy (`workers` worker processes), both serving
/// `model` from the openai-compatible upstream at `base` (no `/v1`) with no limits, their
/// files in `dir` named after `tag`; what could not start is returned as problems.
pub fn start_both(
    tollgate: &Path,
    dir: &Path,
    tag: &str,
    model: &str,
    base: &str,
    workers: usize,
) -> (Vec<Server>, Vec<String>) {
    let catalog_path = dir.join(format!("{tag}-catalog.toml"));
    let gateway = std::fs::write(&catalog_path, catalog(model, base, ""))
        .map_err(|e| e.to_string())
        .and_then(|()| {
            let global = ["--catalog".to_owned(), catalog_path.display().to_string()];
            start_tollgate("tollgate serve", tollgate, &global)
        });
    let litellm = litellm_binary().and_then(|bin| {
        let config = dir.join(format!("{tag}-litellm.yaml"));
        std::fs::write(&config, litellm_config(model, base, "", "")).map_err(|e| e.to_string())?;
        start_litellm(
            "LiteLLM",
            &bin,
            &config,
            workers,
            &dir.join(format!("{tag}-litellm.log")),
        )
    });
    let (mut servers, mut problems) = (Vec::new(), Vec::new());
    for s in [gateway, litellm] {
        match s {
            Ok(s) => servers.push(s),
            Err(e) => problems.push(e),
        }
    }
    (servers, problems)
}

/// A blocking `GET path` on 127.0.0.1:`port` answered 200.
pub fn http_get_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}

/// The process and its descendants (from every `/proc/PID/stat`'s parent).
fn tree(root: u32) -> Vec<u32> {
    let mut parents = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = stat_fields(pid).and_then(|f| f.get(1)?.parse::<u32>().ok()) {
                parents.push((pid, ppid));
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    out
}

/// The fields of `/proc/PID/stat` after the command name: state, ppid, ….
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 on Linux).
fn ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// User + system CPU time of one process (`utime`, `stime`: fields 14 and 15 of `stat`).
pub fn cpu_time(pid: u32) -> Duration {
    stat_time(pid, &[11, 12])
}

/// System CPU time of one process (`stime`).
pub fn system_time(pid: u32) -> Duration {
    stat_time(pid, &[12])
}

/// The sum of these tick fields of `/proc/PID/stat` (indices after the name).
fn stat_time(pid: u32, fields_at: &[usize]) -> Duration {
    let Some(fields) = stat_fields(pid) else {
        return Duration::ZERO;
    };
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the name, field 14 (utime) is index 11 and 15 (stime) index 12.
    Duration::from_secs_f64(fields_at.iter().map(|i| tick(*i)).sum::<f64>() / ticks_per_second())
}

/// `VmHWM` of one process, bytes (0 if gone).
pub fn peak_rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_launch_runs_under_taskset_with_its_env() {
        let launch = Launch {
            env: vec![("TOKIO_WORKER_THREADS".into(), "1".into())],
            core: Some(0),
        };
        let c = launch.command("tollgate");
        assert_eq!(c.get_program(), "taskset");
        let args: Vec<_> = c.get_args().collect();
        assert_eq!(args, ["-c", "0", "tollgate"]);
        let env: Vec<_> = c.get_envs().collect();
        assert_eq!(
            env,
            [(
                std::ffi::OsStr::new("TOKIO_WORKER_THREADS"),
                Some(std::ffi::OsStr::new("1"))
            )]
        );
        let free = Launch::default().command("tollgate");
        assert_eq!(free.get_program(), "tollgate");
        assert_eq!(free.get_args().count(), 0);
    }

    #[test]
    fn this_process_has_cpu_time_and_a_peak() {
        let me = std::process::id();
        assert!(peak_rss(me) > 0);
        // Spin until the kernel has counted a tick of CPU time (on a loaded machine 30 ms
        // of wall time may hold none); bounded, so a counter that never moves fails.
        let spin = tollgate::clock::now();
        while cpu_time(me) == Duration::ZERO && spin.elapsed() < Duration::from_secs(20) {}
        assert!(cpu_time(me) > Duration::ZERO);
        assert!(tree(me).contains(&me));
    }
}
