//! Ctrl-C during a run: once, nothing more is sent and requests still waiting for the
//! limiter are dropped; twice, what is in flight is cancelled too. Each task watches the
//! level reached.

use tokio::sync::watch;

/// How far Ctrl-C has gone: 0 running, 1 stop sending, 2 cancel what is in flight.
pub(super) type StopLevel = watch::Receiver<u8>;

/// Waits until Ctrl-C has gone as far as `level`.
pub(super) async fn reached(stop: &mut StopLevel, level: u8) {
    let _ = stop.wait_for(|l| *l >= level).await;
}

/// Counts Ctrl-C presses from now on (saying on stderr what each one does), as the
/// level every task of the run watches.
pub(super) fn watch_interrupts() -> std::io::Result<StopLevel> {
    let (stop_tx, stop) = watch::channel(0u8);
    let mut interrupts = Interrupts::new()?;
    tokio::spawn(async move {
        while interrupts.next().await {
            let level = (*stop_tx.borrow() + 1).min(2);
            if level == 1 {
                eprintln!(
                    "\ntollgate: stopping: nothing more is sent; finishing what is in flight \
                     (Ctrl-C again to cancel it)"
                );
            } else {
                eprintln!("tollgate: cancelling what is in flight");
            }
            let _ = stop_tx.send(level);
        }
    });
    Ok(stop)
}

/// Ctrl-C presses, each one seen: the stream is registered once, so a second press
/// that comes while the first is handled is not lost.
struct Interrupts {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
}

impl Interrupts {
    fn new() -> std::io::Result<Self> {
        Ok(Interrupts {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?,
        })
    }

    /// The next press; false when no more can come.
    async fn next(&mut self) -> bool {
        #[cfg(unix)]
        return self.signal.recv().await.is_some();
        #[cfg(not(unix))]
        return tokio::signal::ctrl_c().await.is_ok();
    }
}
