//! A process's first call through `openai` and `openai-compatible`
//! (`tollgate_bench::first_call`): `TOLLGATE_FIRST_CALL_PROCESSES` fresh processes
//! (default 15) per key and pause, against a minimal server on 127.0.0.1. Prints one
//! table (and writes it where `TOLLGATE_BENCH_OUT` says).
//!
//! The bench binary is its own child: with `TOLLGATE_FIRST_CALL_CHILD` set to a key it
//! makes that process's first call and prints what it saw.

use std::process::{Command, Stdio};
use std::time::Duration;

use tollgate_bench::first_call::{self, Cell, FirstCall, KEYS};

const CHILD_ENV: &str = "TOLLGATE_FIRST_CALL_CHILD";
const URL_ENV: &str = "TOLLGATE_FIRST_CALL_URL";
const PAUSE_ENV: &str = "TOLLGATE_FIRST_CALL_PAUSE_MS";
const PAUSES: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_millis(300),
    Duration::from_millis(1000),
];

fn processes() -> usize {
    std::env::var("TOLLGATE_FIRST_CALL_PROCESSES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15)
}

fn child(key: &str) {
    let url = std::env::var(URL_ENV).expect("the server's URL");
    let pause = std::env::var(PAUSE_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::ZERO, Duration::from_millis);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(first_call::first_call(key, &url, pause)) {
        Ok(call) => println!("{}", call.line()),
        Err(e) => {
            eprintln!("first call through `{key}` failed: {e}");
            std::process::exit(1);
        }
    }
}

// Each process's life is timed from spawn to exit.
#[allow(clippy::disallowed_methods)]
fn spawn(key: &str, url: &str, pause: Duration) -> (FirstCall, Duration) {
    let exe = std::env::current_exe().expect("this binary");
    let started = std::time::Instant::now();
    let out = Command::new(exe)
        .env(CHILD_ENV, key)
        .env(URL_ENV, url)
        .env(PAUSE_ENV, pause.as_millis().to_string())
        .stderr(Stdio::inherit())
        .output()
        .expect("a child");
    let lived = started.elapsed();
    assert!(out.status.success(), "a child failed through `{key}`");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let call = stdout
        .lines()
        .find_map(FirstCall::parse)
        .expect("the child's FIRST_CALL line");
    (call, lived)
}

fn main() {
    if let Ok(key) = std::env::var(CHILD_ENV) {
        child(&key);
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let port = runtime
        .block_on(first_call::serve())
        .expect("a port on 127.0.0.1");
    let url = format!("http://127.0.0.1:{port}");
    let n = processes();
    let mut cells = Vec::new();
    for pause in PAUSES {
        let mut row: Vec<Cell> = KEYS
            .iter()
            .map(|&key| Cell {
                key,
                pause,
                calls: Vec::new(),
                processes: Vec::new(),
            })
            .collect();
        // The keys take turns, so that the machine's noise falls on both alike.
        for _ in 0..n {
            for cell in &mut row {
                let (call, lived) = spawn(cell.key, &url, pause);
                cell.calls.push(call);
                cell.processes.push(lived);
            }
        }
        for cell in &row {
            eprintln!(
                "{} after {:?}: send→answer {:?}",
                cell.key,
                pause,
                cell.calls
                    .iter()
                    .map(|c| c.send_to_answer)
                    .collect::<Vec<_>>()
            );
        }
        cells.extend(row);
    }
    first_call::section(&cells, "cargo bench -p tollgate-bench --bench first_call").emit();
}
