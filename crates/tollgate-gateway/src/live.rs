//! Live reload: [`LiveGateway`] holds the gateway new requests are served by and swaps it
//! whole, so a request runs start to end on the gateway it arrived at (its keys, its
//! catalog, its `Models`) while requests after a reload get the new one. The swap is one
//! write of a pointer: no request sees half of a reload. `POST /v1/tollgate/reload`
//! (an admin key's) asks for one, as SIGHUP does for `tollgate serve`.

use std::fmt;
use std::sync::{Arc, Mutex, RwLock, Weak};

use axum::Router;
use axum::extract::Request;
use tower::ServiceExt;

use crate::reload::{Reload, ReloadError, Reloaded};
use crate::router::router;
use crate::state::Gateway;

/// What a reload reads the new gateway from: given the gateway serving now, the one to
/// serve next (typically `current.reloaded(current.models().reloaded(catalog)?, keys)`
/// over files read again), or why not.
pub type ReloadSource =
    dyn Fn(&Gateway) -> Result<Gateway, Box<dyn std::error::Error + Send + Sync>> + Send + Sync;

/// The gateway new requests get, swapped whole by a reload. Serve it with
/// [`serve_live`](crate::serve_live), or mount [`LiveGateway::router`].
pub struct LiveGateway {
    current: RwLock<Current>,
    source: Option<Box<ReloadSource>>,
    /// One reload at a time (SIGHUP and the admin route may ask at once).
    reloading: Mutex<()>,
    /// Itself, for the gateways it serves (the admin route asks it to reload).
    me: Weak<LiveGateway>,
}

/// The gateway serving now, and its routes.
struct Current {
    gateway: Gateway,
    app: Router,
}

impl fmt::Debug for LiveGateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveGateway")
            .field("reloadable", &self.source.is_some())
            .finish_non_exhaustive()
    }
}

impl LiveGateway {
    /// `gateway`, swappable with [`LiveGateway::replace`] but with nothing to reload
    /// from ([`LiveGateway::reload`] says [`ReloadError::NotReloadable`]).
    pub fn new(gateway: Gateway) -> Arc<Self> {
        Self::with_source(gateway, None)
    }

    /// `gateway`, which [`LiveGateway::reload`] replaces with what `source` makes of it.
    pub fn reloading(
        gateway: Gateway,
        source: impl Fn(&Gateway) -> Result<Gateway, Box<dyn std::error::Error + Send + Sync>>
        + Send
        + Sync
        + 'static,
    ) -> Arc<Self> {
        Self::with_source(gateway, Some(Box::new(source)))
    }

    fn with_source(gateway: Gateway, source: Option<Box<ReloadSource>>) -> Arc<Self> {
        Arc::new_cyclic(|live: &Weak<LiveGateway>| LiveGateway {
            current: RwLock::new(Current::of(gateway, live.clone())),
            source,
            reloading: Mutex::new(()),
            me: live.clone(),
        })
    }

    /// The gateway serving new requests now.
    pub fn current(&self) -> Gateway {
        self.read().gateway.clone()
    }

    /// Serves `gateway` to every request from now on; requests in flight finish on the
    /// one they started with.
    pub fn replace(self: &Arc<Self>, gateway: Gateway) {
        let next = Current::of(gateway, Arc::downgrade(self));
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next;
    }

    /// Reads the gateway anew from the source and serves it from now on; when the source
    /// refuses, the gateway serving now goes on, and the reason is the error.
    pub fn reload(&self) -> Result<Reloaded, ReloadError> {
        Reload::reload(self)
    }

    /// The routes of whichever gateway is current when each request arrives.
    pub fn router(self: &Arc<Self>) -> Router {
        let live = self.clone();
        Router::new().fallback_service(tower::service_fn(move |request: Request| {
            let app = live.read().app.clone();
            async move { app.oneshot(request).await }
        }))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Current> {
        self.current.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Reload for LiveGateway {
    fn reload(&self) -> Result<Reloaded, ReloadError> {
        let source = self.source.as_ref().ok_or(ReloadError::NotReloadable)?;
        let _one = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let next = source(&self.current()).map_err(ReloadError::Refused)?;
        let reloaded = Reloaded {
            models: next.models().catalog().models().count(),
            keys: next.keys().map(crate::Keys::len),
        };
        let me = self.me.clone();
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Current::of(next, me);
        Ok(reloaded)
    }
}

impl Current {
    fn of(gateway: Gateway, live: Weak<LiveGateway>) -> Self {
        let live: Weak<dyn Reload> = live;
        let gateway = gateway.with_live(live);
        Current {
            app: router(gateway.clone()),
            gateway,
        }
    }
}
