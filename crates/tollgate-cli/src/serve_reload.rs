//! `tollgate serve`'s live reload: on SIGHUP (and `POST /v1/tollgate/reload` with an
//! admin key) the catalog and the keys file are read again and swapped in whole; a file
//! that does not parse, or keys that do not fit the new catalog, are refused with the
//! reason on stderr and the old ones kept.

use std::path::PathBuf;
use std::sync::Arc;

use tollgate::Catalog;
use tollgate_gateway::{Gateway, Keys, LiveGateway};

use crate::setup::DEMO_CATALOG;

/// The files a reload reads: the catalog (`None`: the embedded demo) and the keys.
#[derive(Debug, Clone)]
pub(crate) struct Files {
    pub(crate) catalog: Option<PathBuf>,
    pub(crate) keys: Option<PathBuf>,
}

impl Files {
    /// The gateway `current` becomes with the files as they are now: the catalog's
    /// unchanged models keep their limiters, the keys' unchanged caps and budgets theirs.
    fn read(&self, current: &Gateway) -> Result<Gateway, Box<dyn std::error::Error + Send + Sync>> {
        let catalog = match &self.catalog {
            Some(path) => Catalog::from_toml_file(path)?,
            None => Catalog::from_toml_str(DEMO_CATALOG)?,
        };
        let models = current.models().reloaded(catalog)?;
        let keys = match &self.keys {
            Some(path) => Some(Keys::from_toml_file(path)?),
            None => None,
        };
        Ok(current.reloaded(models, keys)?)
    }
}

/// `gateway`, reloadable from `files`.
pub(crate) fn live(gateway: Gateway, files: Files) -> Arc<LiveGateway> {
    LiveGateway::reloading(gateway, move |current| files.read(current))
}

/// Reloads `live` at each SIGHUP until the process ends, saying what was loaded on
/// stdout, or why the reload was refused on stderr (the log's warning).
#[cfg(unix)]
pub(crate) async fn reload_on_hangup(live: Arc<LiveGateway>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(e) => {
            tracing::warn!(target: "tollgate::reload", error = %e, "cannot listen for SIGHUP; reload with POST /v1/tollgate/reload");
            return;
        }
    };
    while hangups.recv().await.is_some() {
        let live = live.clone();
        match tokio::task::spawn_blocking(move || live.reload()).await {
            Ok(Ok(reloaded)) => println!(
                "tollgate serve: reloaded on SIGHUP: {} models{}",
                reloaded.models,
                reloaded
                    .keys
                    .map(|n| format!(", {n} virtual keys"))
                    .unwrap_or_default()
            ),
            Ok(Err(e)) => {
                tracing::warn!(target: "tollgate::reload", error = %e, "reload on SIGHUP refused");
            }
            Err(e) => tracing::warn!(target: "tollgate::reload", error = %e, "reload failed"),
        }
    }
}

/// Without SIGHUP, only the admin route reloads.
#[cfg(not(unix))]
pub(crate) async fn reload_on_hangup(_live: Arc<LiveGateway>) {}
