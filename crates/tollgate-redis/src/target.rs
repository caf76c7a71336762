//! Where the backend connects: one Redis node, or a Redis Cluster (several seed nodes, or
//! a `redis+cluster://` URL), and the one connection type the rest of the crate uses for
//! either (the redis crate's `ConnectionManager` or its cluster connection, which routes
//! each command to its key's slot and follows failovers).

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;

/// What a `--redis` URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// One node (`redis://host:port/`).
    Single(String),
    /// A cluster, reached through these seed nodes (`redis://` URLs); the rest of the
    /// cluster is learned from them (`CLUSTER SLOTS`).
    Cluster(Vec<String>),
}

impl Target {
    /// Reads `url`: `redis://a:1,redis://b:2` (two or more seeds, comma-separated; a seed
    /// without a scheme, `b:2`, takes the first one's scheme and credentials) or
    /// `redis+cluster://a:1[,b:2…]` (`rediss+cluster://` for TLS) is a cluster; one
    /// `redis://` URL is one node. `Err` says what is wrong (without the password).
    pub(crate) fn parse(url: &str) -> Result<Target, String> {
        let parts: Vec<&str> = url.split(',').map(str::trim).collect();
        let first = parts[0];
        let (scheme, rest) = first
            .split_once("://")
            .ok_or_else(|| format!("`{}` is not a redis:// URL", crate::config::shown(first)))?;
        let (base, cluster) = match scheme.strip_suffix("+cluster") {
            Some(base) => (base, true),
            None => (scheme, parts.len() > 1),
        };
        // The first seed's credentials, for seeds given as bare `host:port`.
        let userinfo = rest
            .split('/')
            .next()
            .and_then(|authority| authority.rsplit_once('@'))
            .map(|(user, _)| format!("{user}@"))
            .unwrap_or_default();
        let mut urls = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let url = match part.split_once("://") {
                Some((s, rest)) => {
                    format!("{}://{rest}", s.strip_suffix("+cluster").unwrap_or(s))
                }
                None if i > 0 && !part.is_empty() => format!("{base}://{userinfo}{part}"),
                None => String::new(),
            };
            if redis::parse_redis_url(&url).is_none() {
                return Err(format!(
                    "`{}` is not a redis:// URL",
                    crate::config::shown(part)
                ));
            }
            urls.push(url);
        }
        if cluster {
            Ok(Target::Cluster(urls))
        } else {
            Ok(Target::Single(urls.remove(0)))
        }
    }

    /// The URL the epoch subscription uses on its `attempt`-th try: the node, or the
    /// seeds in turn (a `PUBLISH` reaches every node of a cluster, so any one will do).
    pub(crate) fn subscribe_url(&self, attempt: usize) -> &str {
        match self {
            Target::Single(url) => url,
            Target::Cluster(seeds) => &seeds[attempt % seeds.len()],
        }
    }
}

/// A connection to the node or the cluster; cheap to clone (both kinds are shared).
#[derive(Clone)]
pub(crate) enum Shared {
    /// One node, reconnecting on its own.
    Single(ConnectionManager),
    /// A cluster: each command goes to its key's slot's primary; on a connection error
    /// or a `MOVED` the slot map is read again, so a promoted replica is found.
    Cluster(ClusterConnection),
}

impl Shared {
    /// A connection to `target` that connects on its first command; `timeouts` bounds
    /// each connection attempt and reply (`None`: none, for the paused test clock).
    pub(crate) fn lazy(target: &Target, timeouts: Option<Duration>) -> redis::RedisResult<Shared> {
        match target {
            Target::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(20))
                    .set_max_delay(Duration::from_millis(200))
                    .set_connection_timeout(timeouts)
                    .set_response_timeout(timeouts);
                ConnectionManager::new_lazy_with_config(client, config).map(Shared::Single)
            }
            Target::Cluster(seeds) => {
                // Few, short retries: while a slot has no primary a call fails (closed)
                // within the call timeout rather than waiting out a long backoff.
                let mut builder = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                    .retries(3)
                    .min_retry_wait(20)
                    .max_retry_wait(200);
                let mut config = redis::cluster::ClusterConfig::new();
                if let Some(t) = timeouts {
                    builder = builder.overall_response_timeout(Some(t));
                    config = config.set_connection_timeout(t).set_response_timeout(t);
                }
                let client = builder.build()?;
                Ok(Shared::Cluster(
                    client.get_pending_async_connection_with_config(config),
                ))
            }
        }
    }
}

impl ConnectionLike for Shared {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Shared::Single(c) => c.req_packed_command(cmd),
            Shared::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Shared::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Shared::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Shared::Single(c) => c.get_db(),
            Shared::Cluster(c) => c.get_db(),
        }
    }
}
