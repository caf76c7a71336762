//! `cargo xtask bench`: builds the benchmarks in release mode, runs each, and writes
//! `docs/benchmarks.md` whole from that one run: the machine and the command, then every
//! benchmark's sections, each stamped with the commit, the time and the machine's load
//! it ran at (so a figure is never read apart from when and under what it was made).

use std::process::{Command, ExitCode};
use std::time::Instant;

use crate::{cargo, output, workspace_root};

/// The benchmarks `bench` runs, in order: (package, `cargo bench` target).
const BENCHES: [(&str, &str); 12] = [
    ("tollgate-bench", "overhead"),
    ("tollgate-bench", "pacing"),
    ("tollgate-bench", "adaptive"),
    ("tollgate-bench", "priority"),
    ("tollgate-bench", "headers"),
    ("tollgate-bench", "distributed"),
    ("tollgate-bench", "first_call"),
    ("tollgate-bench", "peers"),
    ("tollgate-bench", "gateway"),
    ("tollgate", "sse"),
    ("tollgate-bench", "batch"),
    ("tollgate-bench", "keys"),
];

/// The variable through which a benchmark hands its markdown section over (the bench
/// crate's `report::OUT_ENV`).
const BENCH_OUT_ENV: &str = "TOLLGATE_BENCH_OUT";

/// When and under what one benchmark ran, for the line under each of its headings.
#[derive(Debug, Clone, PartialEq)]
struct Stamp {
    /// `cargo bench -p P --bench N`.
    command: String,
    /// The short commit, `-dirty` when the tree had changes.
    commit: String,
    /// `YYYY-MM-DD HH:MM UTC` when it started.
    date: String,
    /// The one-minute load average before and after it.
    load: (f64, f64),
    /// How long it ran, seconds.
    seconds: f64,
}

impl Stamp {
    fn line(&self) -> String {
        format!(
            "_Ran as `{}` at commit {} on {}, in {:.0} s; one-minute load average {:.2} before, {:.2} after (`/proc/loadavg`, 2 cores means 2.0 is both busy)._",
            self.command, self.commit, self.date, self.seconds, self.load.0, self.load.1
        )
    }
}

/// `markdown` with the stamp's line under each `## ` heading (a benchmark may write
/// several sections).
fn stamped(markdown: &str, stamp: &Stamp) -> String {
    let mut out = String::with_capacity(markdown.len() + 256);
    for line in markdown.lines() {
        out.push_str(line);
        out.push('\n');
        if line.starts_with("## ") {
            out.push('\n');
            out.push_str(&stamp.line());
            out.push('\n');
        }
    }
    out
}

/// The one-minute load average now.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// The short commit of the tree, `-dirty` if it has uncommitted changes.
fn commit() -> String {
    let short =
        output("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    let dirty = output("git", &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{short}-dirty")
    } else {
        short
    }
}

fn utc_now() -> String {
    output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "unknown".to_owned())
}

// Timings are for the person reading the log and the stamps.
#[allow(clippy::disallowed_methods)]
pub(crate) fn bench() -> ExitCode {
    let root = workspace_root();
    let started = Instant::now();
    // The benchmarks, and the `tollgate` binary the batch, peers and gateway benchmarks run
    // (found beside them in `target/release`).
    for args in [
        &[
            "bench",
            "-p",
            "tollgate-bench",
            "-p",
            "tollgate-anthropic",
            "--no-run",
        ][..],
        &["build", "--release", "-p", "tollgate-cli"][..],
    ] {
        println!("\n==> xtask bench: build (cargo {})", args.join(" "));
        let built = Command::new(cargo())
            .current_dir(&root)
            .args(args)
            .status()
            .is_ok_and(|s| s.success());
        if !built {
            eprintln!("xtask bench: the benchmarks did not build");
            return ExitCode::FAILURE;
        }
    }
    let out_dir = root.join("target").join("xtask-bench");
    if let Err(e) = std::fs::create_dir_all(&out_dir) {
        eprintln!("xtask bench: cannot create {}: {e}", out_dir.display());
        return ExitCode::FAILURE;
    }
    let commit = commit();
    let mut sections = Vec::new();
    for (package, name) in BENCHES {
        let out = out_dir.join(format!("{name}.md"));
        let _ = std::fs::remove_file(&out);
        let command = format!("cargo bench -p {package} --bench {name}");
        println!("\n==> xtask bench: {name} ({command})");
        let (date, before, step) = (utc_now(), load_average(), Instant::now());
        let ok = Command::new(cargo())
            .current_dir(&root)
            .args(["bench", "-p", package, "--bench", name])
            .env(BENCH_OUT_ENV, &out)
            .status()
            .is_ok_and(|s| s.success());
        let stamp = Stamp {
            command,
            commit: commit.clone(),
            date,
            load: (before, load_average()),
            seconds: step.elapsed().as_secs_f64(),
        };
        match (ok, std::fs::read_to_string(&out)) {
            (true, Ok(section)) => {
                println!("==> {name} ok in {:.1}s", stamp.seconds);
                sections.push(stamped(&section, &stamp));
            }
            _ => {
                eprintln!("xtask bench: {name} failed or wrote no table");
                return ExitCode::FAILURE;
            }
        }
    }
    let path = root.join("docs").join("benchmarks.md");
    let doc = benchmarks_doc(&sections, &commit, started.elapsed().as_secs_f64());
    if let Err(e) = std::fs::write(&path, doc) {
        eprintln!("xtask bench: cannot write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!("\nxtask bench: wrote {}", path.display());
    ExitCode::SUCCESS
}

/// `docs/benchmarks.md`: where and how the figures were made, then each benchmark's section.
fn benchmarks_doc(sections: &[String], commit: &str, seconds: f64) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let cores = output("nproc", &[]).unwrap_or_else(|| {
        std::thread::available_parallelism().map_or("unknown".to_owned(), |n| n.to_string())
    });
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or("unknown".to_owned(), |kb| {
            format!("{:.0} GiB", kb / 1024.0 / 1024.0)
        });
    let date = utc_now();
    let rustc = output("rustc", &["--version"]).unwrap_or_else(|| "unknown".to_owned());
    let mut doc = format!(
        "# Benchmarks\n\n\
         Written whole by one run of `cargo xtask bench`; do not edit by hand, run it again. \
         Each section says the commit, the time and the machine's load it ran at. Each benchmark \
         prints its tables, tollgate beside its baselines, measured in the same run: this \
         machine is shared and noisy, so compare ratios rather than absolute times. The \
         simulations (2 to 4) run on tokio's paused clock with seeded randomness and give \
         the same figures on every run; reduced versions of them run as ordinary tests \
         (`benches/tests/`).\n\n\
         | | |\n|---|---|\n\
         | command | `cargo xtask bench` |\n\
         | date | {date} |\n\
         | commit | {commit} |\n\
         | CPU | {cpu} |\n\
         | cores (`nproc`) | {cores} |\n\
         | memory | {memory} |\n\
         | toolchain | {rustc} |\n\
         | run time | {seconds:.0} s, release build included |\n\n"
    );
    for section in sections {
        doc.push_str(section.trim_end());
        doc.push_str("\n\n");
    }
    doc.truncate(doc.trim_end().len());
    doc.push('\n');
    doc
}

#[cfg(test)]
mod tests {
    use super::{Stamp, stamped};

    fn stamp() -> Stamp {
        Stamp {
            command: "cargo bench -p tollgate-bench --bench gateway".into(),
            commit: "abc1234".into(),
            date: "2026-12-04 19:00 UTC".into(),
            load: (0.5, 1.25),
            seconds: 61.0,
        }
    }

    #[test]
    fn every_section_of_a_benchmark_is_stamped_with_its_commit_date_and_load() {
        let md = "## 8. One\n\ntext\n\n## 8b. Two\n\n| a |\n";
        let out = stamped(md, &stamp());
        assert_eq!(
            out.matches("at commit abc1234 on 2026-12-04 19:00 UTC")
                .count(),
            2
        );
        assert!(out.contains("load average 0.50 before, 1.25 after"));
        assert!(out.contains("`cargo bench -p tollgate-bench --bench gateway`"));
        // Under its heading, the rest kept in order.
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "## 8. One");
        assert!(lines[2].starts_with("_Ran as"));
        assert!(out.ends_with("| a |\n"));
    }

    #[test]
    fn text_without_a_heading_is_not_stamped() {
        assert_eq!(stamped("no heading\n", &stamp()), "no heading\n");
    }
}
