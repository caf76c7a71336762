//! Admission: a model reservation together with other resources, all or nothing.
//!
//! A job that needs a rate-limit reservation *and* e.g. a database connection should not
//! sit on one while waiting for the other: that starves everyone else of the one it holds.
//! [`Admission::admit`] waits for the model's bucket holding nothing else; with the
//! reservation in hand it *tries* each other resource; if one is busy it gives everything
//! back and waits for that resource, again holding nothing, then starts over.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use tokio::sync::Semaphore;

use super::{Cost, LimiterBackend, Priority, Reservation};
use crate::error::{Error, Result};

/// A resource an [`Admission`] can take together with a model reservation.
#[async_trait::async_trait]
pub trait AdmissionResource: Send + Sync + fmt::Debug {
    /// Takes the resource now, or `None` if it is busy. Dropping the returned guard
    /// releases it.
    fn try_acquire(&self) -> Option<Box<dyn Any + Send>>;

    /// Waits until the resource is likely free, holding nothing when it returns.
    async fn ready(&self) -> Result<()>;
}

/// `permits` permits of a tokio [`Semaphore`] (a connection pool, a concurrency cap).
#[derive(Debug, Clone)]
pub struct SemaphoreResource {
    semaphore: Arc<Semaphore>,
    permits: u32,
}

impl SemaphoreResource {
    /// `permits` of `semaphore` per admission.
    pub fn new(semaphore: Arc<Semaphore>, permits: u32) -> Self {
        SemaphoreResource { semaphore, permits }
    }
}

#[async_trait::async_trait]
impl AdmissionResource for SemaphoreResource {
    fn try_acquire(&self) -> Option<Box<dyn Any + Send>> {
        self.semaphore
            .clone()
            .try_acquire_many_owned(self.permits)
            .ok()
            .map(|p| Box::new(p) as Box<dyn Any + Send>)
    }

    async fn ready(&self) -> Result<()> {
        // Wait our turn in the semaphore's FIFO queue, then hand the permits straight back.
        let permit = self
            .semaphore
            .acquire_many(self.permits)
            .await
            .map_err(|_| Error::Cancelled)?;
        drop(permit);
        Ok(())
    }
}

/// Everything an admission took; dropping it releases all of it.
#[derive(Debug)]
pub struct AdmissionGrant {
    model_id: String,
    reservation: Reservation,
    guards: Vec<Box<dyn Any + Send>>,
}

impl AdmissionGrant {
    /// The model (or `model/deployment`) the reservation was made on.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The model reservation.
    pub fn reservation(&mut self) -> &mut Reservation {
        &mut self.reservation
    }

    /// Splits the grant: the reservation (to settle) and the other resources' guards.
    pub fn into_parts(self) -> (Reservation, Vec<Box<dyn Any + Send>>) {
        (self.reservation, self.guards)
    }
}

/// A model's limiter plus other resources, granted together or not at all.
#[derive(Debug, Clone)]
pub struct Admission {
    limiter: Arc<dyn LimiterBackend>,
    resources: Vec<Arc<dyn AdmissionResource>>,
}

impl Admission {
    /// Admission on `limiter` alone; add resources with [`Admission::with`].
    pub fn new(limiter: Arc<dyn LimiterBackend>) -> Self {
        Admission {
            limiter,
            resources: Vec::new(),
        }
    }

    /// Also requires `resource`.
    pub fn with(mut self, resource: impl AdmissionResource + 'static) -> Self {
        self.resources.push(Arc::new(resource));
        self
    }

    /// The model (or `model/deployment`) whose buckets this admission reserves on.
    pub fn model_id(&self) -> &str {
        self.limiter.model_id()
    }

    /// The buckets it reserves on (asked for an estimate when a bounded wait ends).
    pub(crate) fn limiter(&self) -> &Arc<dyn LimiterBackend> {
        &self.limiter
    }

    /// Waits until `cost` and every resource can be held at once, holding none of them
    /// while it waits. Cancellation-safe: dropping the future gives back whatever it held.
    pub async fn admit(&self, cost: Cost) -> Result<AdmissionGrant> {
        self.admit_with(cost, Priority::Default).await
    }

    /// [`Admission::admit`] at a priority class.
    pub async fn admit_with(&self, cost: Cost, priority: Priority) -> Result<AdmissionGrant> {
        loop {
            let reservation = self.limiter.reserve(cost, priority).await?;
            let mut guards = Vec::with_capacity(self.resources.len());
            let mut busy = None;
            for resource in &self.resources {
                match resource.try_acquire() {
                    Some(guard) => guards.push(guard),
                    None => {
                        busy = Some(resource.clone());
                        break;
                    }
                }
            }
            match busy {
                None => {
                    return Ok(AdmissionGrant {
                        model_id: self.limiter.model_id().to_owned(),
                        reservation,
                        guards,
                    });
                }
                Some(resource) => {
                    drop(guards);
                    reservation.release();
                    resource.ready().await?;
                }
            }
        }
    }
}
