//! [`FileSpendLedger`]: a [`SpendLedger`] kept in a JSON file, so that the keys' daily
//! budgets survive a restart of a gateway that has no Redis (`tollgate serve` without
//! `--redis`).
//!
//! The accounts live in memory behind one mutex (holds and settles from every task of
//! the process count exactly once); what is spent is written to the file on every settle
//! that spent something, before the settle returns: the whole file to `<file>.tmp`,
//! synced, then renamed over the file (and the directory synced), so a crash leaves the
//! old file or the new one, never half of one. Holds (calls in flight) are not written:
//! a call in flight when the process dies is not counted. An account untouched for more
//! than [`FileSpendLedger::RETENTION_DAYS`] days is dropped when the file is opened (a daily budget's
//! account is named after its day, so old days go). One ledger per file: an exclusive
//! lock on `<file>.lock`, held while the ledger lives, refuses a second (in this process
//! or another); replicas that share budgets use Redis instead.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use tollgate::pipeline::SpendLedger;

use crate::quota::today;

/// A float rounding tolerance, far below a millionth of a cent (as `SpendCap`'s).
const TOLERANCE_USD: f64 = 1e-12;

/// Why a spend state file could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpendFileError {
    /// The file (or its lock or directory) could not be read or written.
    #[error("cannot use spend state file `{path}`: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The file is not a spend state file.
    #[error(
        "spend state file `{path}` is not valid ({source}); it holds what the keys spent \
         today: repair it, or remove it to start their budgets afresh"
    )]
    Corrupt {
        /// The file.
        path: String,
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
    /// Another ledger (in this process or another) has the file open.
    #[error(
        "spend state file `{path}` is in use by another gateway; give each gateway its own \
         file, or share the budgets on Redis (`--redis`)"
    )]
    InUse {
        /// The file.
        path: String,
    },
}

/// Spend caps' accounts in a file (see the module docs): what `tollgate serve` uses for
/// the keys' daily budgets without `--redis`. Give it to
/// [`Gateway::with_keys_on`](crate::Gateway::with_keys_on) as the ledger:
///
/// ```
/// use std::sync::Arc;
///
/// use tollgate::limit::InProcessLimiters;
/// use tollgate::{Catalog, Models};
/// use tollgate_fake as _; // links the `fake` provider the catalog names
/// use tollgate_gateway::{FileSpendLedger, Gateway, Keys, hash_secret};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let catalog = Catalog::from_toml_str(
///     "[models.chat]\nprovider = \"fake\"\nmax_output_tokens = 64\n\
///      [models.chat.price]\ninput = 1.0\noutput = 2.0\n",
/// )?;
/// let keys = Keys::from_toml_str(&format!(
///     "[[keys]]\nid = \"nb\"\nsecret_sha256 = \"{}\"\nbudget_usd_per_day = 5.0\n",
///     hash_secret("the-secret")
/// ))?;
/// let dir = tempfile::tempdir()?;
/// let ledger = FileSpendLedger::open(dir.path().join("keys.spend.json"))?;
/// let gateway = Gateway::new(Models::builder().catalog(catalog).build()?)
///     .with_keys_on(keys, Arc::new(InProcessLimiters), Some(Arc::new(ledger)))?;
/// # drop(gateway);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FileSpendLedger {
    path: PathBuf,
    book: Mutex<BTreeMap<String, Account>>,
    /// Holds the exclusive lock on `<file>.lock` while the ledger lives.
    _lock: File,
}

#[derive(Debug, Default)]
struct Account {
    spent_usd: f64,
    held_usd: f64,
    /// The day (since the Unix epoch, UTC) it was last held or settled on.
    day: u64,
}

/// The file's format.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    version: u32,
    accounts: BTreeMap<String, StoredAccount>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredAccount {
    spent_usd: f64,
    day: u64,
}

impl FileSpendLedger {
    /// How many days an account is kept after it was last used: two, past a daily
    /// budget's day (as `tollgate_redis::DEFAULT_SPEND_TTL`).
    pub const RETENTION_DAYS: u64 = 2;

    /// Opens (or creates) the ledger in `path`: reads what was spent, drops accounts
    /// untouched for more than [`FileSpendLedger::RETENTION_DAYS`] days, and writes the file back, so that
    /// a file that cannot be written fails here rather than at the first settle.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, SpendFileError> {
        Self::open_on(path.into(), today())
    }

    /// [`FileSpendLedger::open`] on `day` (days since the epoch).
    fn open_on(path: PathBuf, day: u64) -> Result<Self, SpendFileError> {
        let io_error = |source| SpendFileError::Io {
            path: path.display().to_string(),
            source,
        };
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(sibling(&path, "lock"))
            .map_err(io_error)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(SpendFileError::InUse {
                    path: path.display().to_string(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io_error(e)),
        }
        let mut book = BTreeMap::new();
        match fs::read(&path) {
            Ok(bytes) => {
                let stored: Stored =
                    serde_json::from_slice(&bytes).map_err(|source| SpendFileError::Corrupt {
                        path: path.display().to_string(),
                        source,
                    })?;
                for (name, a) in stored.accounts {
                    if a.day + Self::RETENTION_DAYS >= day {
                        let account = Account {
                            spent_usd: a.spent_usd,
                            held_usd: 0.0,
                            day: a.day,
                        };
                        book.insert(name, account);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(e)),
        }
        let ledger = FileSpendLedger {
            path: path.clone(),
            book: Mutex::new(book),
            _lock: lock,
        };
        ledger.write(&ledger.lock()).map_err(io_error)?;
        Ok(ledger)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What cap `cap` has spent (settled), as the file holds it.
    pub fn spent_usd(&self, cap: &str) -> f64 {
        self.lock().get(cap).map_or(0.0, |a| a.spent_usd)
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Account>> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `book`'s spend to the file: to `<file>.tmp`, synced, renamed over it.
    /// Called with the lock held, so a later state is never overwritten by an earlier.
    fn write(&self, book: &BTreeMap<String, Account>) -> io::Result<()> {
        let stored = Stored {
            version: 1,
            accounts: book
                .iter()
                .map(|(name, a)| {
                    let account = StoredAccount {
                        spent_usd: a.spent_usd,
                        day: a.day,
                    };
                    (name.clone(), account)
                })
                .collect(),
        };
        let mut bytes = serde_json::to_vec_pretty(&stored)?;
        bytes.push(b'\n');
        let tmp = sibling(&self.path, "tmp");
        let mut file = File::create(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, &self.path)?;
        // The rename is durable once the directory is.
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    }
}

/// `path` with `.suffix` added to its file name.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    path.with_file_name(name)
}

#[tollgate::async_trait]
impl SpendLedger for FileSpendLedger {
    async fn hold(&self, cap: &str, usd: f64, limit_usd: f64) -> tollgate::Result<Result<(), f64>> {
        let mut book = self.lock();
        let account = book.entry(cap.to_owned()).or_default();
        let remaining = limit_usd - account.spent_usd - account.held_usd;
        if usd > remaining + TOLERANCE_USD {
            return Ok(Err(remaining.max(0.0)));
        }
        account.held_usd += usd;
        account.day = today();
        Ok(Ok(()))
    }

    fn settle(&self, cap: &str, held_usd: f64, spent_usd: f64) {
        let mut book = self.lock();
        let account = book.entry(cap.to_owned()).or_default();
        account.held_usd = (account.held_usd - held_usd).max(0.0);
        if spent_usd <= 0.0 {
            return;
        }
        account.spent_usd += spent_usd;
        account.day = today();
        if let Err(e) = self.write(&book) {
            // The spend still counts in this process; the next settle writes it again.
            tracing::warn!(
                path = %self.path.display(),
                cap = %cap,
                error = %e,
                "tollgate-gateway: spend not saved to the state file; a restart now would forget it"
            );
        }
    }
}

#[cfg(test)]
#[path = "spend_file_tests.rs"]
mod tests;
