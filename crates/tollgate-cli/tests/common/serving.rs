//! A `tollgate serve` process for the tests: started on a free 127.0.0.1 port it prints,
//! killed (and reaped) when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use super::tollgate;

/// A running `tollgate serve`, killed (and reaped) if a test fails before stopping it.
pub struct Serving {
    pub child: Child,
    pub url: String,
    pub stdout: BufReader<std::process::ChildStdout>,
    /// What it printed up to and including the line saying where it listens.
    pub banner: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serving {
    /// Sends SIGTERM and waits for the process to exit successfully.
    pub fn terminate(&mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

/// Starts `tollgate serve --listen 127.0.0.1:0 ARGS` and reads the bound address from
/// its output.
pub fn spawn_serve(args: &[&str]) -> Serving {
    spawn_serve_with(&[], args)
}

/// [`spawn_serve`] with the variables `env` set in its environment.
pub fn spawn_serve_with(env: &[(&str, &str)], args: &[&str]) -> Serving {
    let mut child = tollgate()
        .envs(env.iter().copied())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tollgate starts");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut serving = Serving {
        child,
        url: String::new(),
        stdout,
        banner: String::new(),
    };
    let mut line = String::new();
    while serving.url.is_empty() {
        line.clear();
        assert!(
            serving.stdout.read_line(&mut line).unwrap() > 0,
            "serve exited early"
        );
        serving.banner.push_str(&line);
        if let Some(rest) = line.split("listening on ").nth(1) {
            serving.url = rest.split_whitespace().next().unwrap().to_owned();
        }
    }
    serving
}
