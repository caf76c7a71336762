//! The replay cache: canonical response bytes by [`crate::CacheKey`], in memory or in a
//! directory, so a recorded run can be replayed offline.

use std::collections::HashMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::cache::CacheKey;
use crate::error::{Error, Result};
use crate::response::LlmResponse;

/// Where replayed responses are kept: canonical response bytes by cache key.
#[async_trait::async_trait]
pub trait ReplayStore: Send + Sync + Debug {
    /// The stored bytes for `key`, if any.
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>>;
    /// Stores `bytes` under `key`, replacing what was there.
    async fn put(&self, key: &CacheKey, bytes: &[u8]) -> Result<()>;
}

/// A replay store in memory.
#[derive(Debug, Default)]
pub struct MemoryReplayStore {
    entries: Mutex<HashMap<CacheKey, Vec<u8>>>,
}

impl MemoryReplayStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait::async_trait]
impl ReplayStore for MemoryReplayStore {
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>> {
        Ok(self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned())
    }

    async fn put(&self, key: &CacheKey, bytes: &[u8]) -> Result<()> {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(*key, bytes.to_vec());
        Ok(())
    }
}

/// A replay store on disk: one file `<hex key>.json` per response in a directory.
///
/// Writes go to a temporary file that is then renamed, so a reader never sees half a
/// response.
#[derive(Debug, Clone)]
pub struct DirReplayStore {
    dir: PathBuf,
}

impl DirReplayStore {
    /// A store in `dir`, created on first write.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DirReplayStore { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(format!("{}.json", key.to_hex()))
    }
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::ReplayStore {
        path: path.display().to_string(),
        source,
    }
}

#[async_trait::async_trait]
impl ReplayStore for DirReplayStore {
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>> {
        let path = self.path_of(key);
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(&path, e)),
        }
    }

    async fn put(&self, key: &CacheKey, bytes: &[u8]) -> Result<()> {
        tokio::fs::create_dir_all(&self.dir)
            .await
            .map_err(|e| io_error(&self.dir, e))?;
        let path = self.path_of(key);
        let tmp = self
            .dir
            .join(format!(".{}.{}.tmp", key.to_hex(), std::process::id()));
        tokio::fs::write(&tmp, bytes)
            .await
            .map_err(|e| io_error(&tmp, e))?;
        tokio::fs::rename(&tmp, &path)
            .await
            .map_err(|e| io_error(&path, e))
    }
}

/// Recorded responses by cache key, over any [`ReplayStore`].
#[derive(Debug, Clone)]
pub struct ReplayCache {
    store: Arc<dyn ReplayStore>,
}

impl ReplayCache {
    /// A cache over `store`.
    pub fn new(store: impl ReplayStore + 'static) -> Self {
        ReplayCache {
            store: Arc::new(store),
        }
    }

    /// A cache in memory.
    pub fn in_memory() -> Self {
        Self::new(MemoryReplayStore::new())
    }

    /// A cache in a directory.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Self {
        Self::new(DirReplayStore::new(dir))
    }

    /// The response recorded under `key`, if any.
    pub async fn get(&self, key: &CacheKey) -> Result<Option<LlmResponse>> {
        match self.store.get(key).await? {
            Some(bytes) => LlmResponse::from_bytes(bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Records `response` under `key`.
    pub async fn put(&self, key: &CacheKey, response: &LlmResponse) -> Result<()> {
        self.store.put(key, response.bytes()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Block, LlmRequest, Message, ResponseBody, SamplingParams, StopReason, Usage,
        compute_cache_key,
    };

    fn sample() -> (CacheKey, LlmResponse) {
        let request = LlmRequest::new(
            "m",
            vec![Message::user("hi")],
            vec![],
            SamplingParams::new(),
        )
        .unwrap();
        let key = compute_cache_key(&request, "k", 0).unwrap();
        let response = LlmResponse::new(ResponseBody {
            model: "fake-1".into(),
            content: vec![Block::text("hello")],
            stop_reason: StopReason::EndTurn,
            usage: Usage {
                input_tokens: 3,
                output_tokens: 1,
                ..Usage::default()
            },
            refusal: None,
        })
        .unwrap();
        (key, response)
    }

    #[tokio::test]
    async fn replay_cache_in_memory_round_trips_bytes() {
        let cache = ReplayCache::in_memory();
        let (key, response) = sample();
        assert!(cache.get(&key).await.unwrap().is_none());
        cache.put(&key, &response).await.unwrap();
        let back = cache.get(&key).await.unwrap().unwrap();
        assert_eq!(back.bytes(), response.bytes());
        assert_eq!(back.response_digest(), response.response_digest());
    }

    #[tokio::test]
    async fn replay_cache_on_disk_survives_a_new_handle() {
        let dir = tempfile::tempdir().unwrap();
        let (key, response) = sample();
        ReplayCache::in_dir(dir.path())
            .put(&key, &response)
            .await
            .unwrap();
        let back = ReplayCache::in_dir(dir.path())
            .get(&key)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back, response);
        assert!(dir.path().join(format!("{}.json", key.to_hex())).exists());
    }

    #[tokio::test]
    async fn replay_cache_reports_corrupt_files_as_decode_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (key, _) = sample();
        std::fs::write(
            dir.path().join(format!("{}.json", key.to_hex())),
            b"not json",
        )
        .unwrap();
        let err = ReplayCache::in_dir(dir.path()).get(&key).await.unwrap_err();
        assert!(matches!(err, Error::Decode { .. }), "{err}");
    }
}
