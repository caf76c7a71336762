//! The Redis a benchmark runs against (`distributed`, the priority bench on Redis).

use std::process::{Command, Stdio};
use std::time::Duration;

/// The Redis the bench uses: `TOLLGATE_REDIS_URL`, or a private `redis-server` (from
/// `TOLLGATE_REDIS_SERVER` or PATH) on a free port, stopped when dropped.
#[derive(Debug)]
pub struct Redis {
    /// Its URL.
    pub url: String,
    child: Option<std::process::Child>,
}

impl Redis {
    /// `TOLLGATE_REDIS_URL`, or a private server started now; `None` when neither can be had.
    pub fn find_or_start() -> Option<Redis> {
        if let Ok(url) = std::env::var("TOLLGATE_REDIS_URL") {
            return Some(Redis { url, child: None });
        }
        let binary =
            std::env::var("TOLLGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let redis = Redis {
            url: format!("redis://127.0.0.1:{port}/"),
            child: Some(child),
        };
        for _ in 0..300 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(redis);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
