//! [`RampUp`] (R-S4): Google's "500/50/5" schedule for new traffic — at most 500 operations
//! per second to a new kind, then 50 % more every 5 minutes — and the [`Limiter`] that paces
//! operations to it on tokio's clock.
//!
//! The service splits a kind's key ranges as its traffic grows; traffic that grows faster than
//! the splits meets latency and contention. The schedule reaches 500 × 1.5¹⁸ ≈ 738,946
//! operations per second after 90 minutes.
//!
//! ```
//! use std::time::Duration;
//! use datastore_entity::RampUp;
//!
//! let ramp = RampUp::new();
//! assert_eq!(ramp.rate_at(Duration::ZERO), 500.0);
//! assert_eq!(ramp.rate_at(Duration::from_secs(5 * 60)), 750.0);
//! assert_eq!(ramp.rate_at(Duration::from_secs(90 * 60)).floor(), 738_945.0); // 500 × 1.5¹⁸
//! ```

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// The 500/50/5 schedule (R-S4): `initial` operations per second, multiplied by `growth` at
/// the end of every `step`, up to an optional ceiling. [`RampUp::new`] is Google's numbers;
/// the builder methods adapt them (a kind that is already warm can start higher).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RampUp {
    initial: f64,
    growth: f64,
    step: Duration,
    ceiling: f64,
}

impl Default for RampUp {
    fn default() -> Self {
        RampUp::new()
    }
}

impl RampUp {
    /// Operations per second a new kind starts with.
    pub const INITIAL_RATE: f64 = 500.0;
    /// How much the rate grows at each step: 50 %.
    pub const GROWTH: f64 = 1.5;
    /// How long each rate holds: 5 minutes.
    pub const STEP: Duration = Duration::from_secs(5 * 60);

    /// Google's schedule: 500 operations per second, +50 % every 5 minutes, no ceiling.
    pub fn new() -> RampUp {
        RampUp {
            initial: Self::INITIAL_RATE,
            growth: Self::GROWTH,
            step: Self::STEP,
            ceiling: f64::INFINITY,
        }
    }

    /// Starts at `rate` operations per second instead of 500 (at least 1): for traffic moving
    /// to a kind that already takes that much.
    pub fn starting_at(mut self, rate: f64) -> RampUp {
        self.initial = if rate.is_finite() { rate.max(1.0) } else { 1.0 };
        self
    }

    /// Grows no further than `rate` operations per second (at least 1): what the caller's own
    /// budget or quota allows.
    pub fn capped_at(mut self, rate: f64) -> RampUp {
        self.ceiling = if rate.is_nan() {
            f64::INFINITY
        } else {
            rate.max(1.0)
        };
        self
    }

    /// The operations per second the schedule allows `elapsed` after the traffic started:
    /// the initial rate × 1.5 for every whole 5 minutes, at most the ceiling.
    pub fn rate_at(&self, elapsed: Duration) -> f64 {
        let steps = elapsed.as_nanos() / self.step.as_nanos().max(1);
        let steps = i32::try_from(steps).unwrap_or(i32::MAX);
        (self.initial * self.growth.powi(steps)).min(self.ceiling)
    }

    /// A limiter that paces operations to this schedule, its clock starting now (tokio's
    /// clock: `tokio::time::pause` drives it in tests).
    pub fn limiter(&self) -> Limiter {
        let now = Instant::now();
        Limiter {
            ramp: *self,
            started: now,
            next: Mutex::new(now),
        }
    }
}

/// Paces operations to a [`RampUp`] schedule: [`acquire`](Limiter::acquire) waits until the
/// schedule allows `n` more operations. Shared by reference between tasks, it paces them all
/// together.
///
/// ```
/// use std::time::Duration;
/// use datastore_entity::RampUp;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let limiter = RampUp::new().limiter();
/// let start = tokio::time::Instant::now();
/// for _ in 0..4 {
///     limiter.acquire(500).await; // one batch of 500 writes
/// }
/// // 500 operations per second: the fourth batch may start 3 seconds in.
/// assert_eq!(start.elapsed(), Duration::from_secs(3));
/// # });
/// ```
#[derive(Debug)]
pub struct Limiter {
    ramp: RampUp,
    started: Instant,
    /// When the next operation may start: the sum of the time every acquired operation costs.
    next: Mutex<Instant>,
}

impl Limiter {
    /// Waits until the schedule allows `operations` more, then returns: they may start now.
    /// Each operation costs `1 / rate` seconds of the schedule, at the rate in force when its
    /// turn comes; a batch starts at once when the schedule has room and is paid for after.
    pub async fn acquire(&self, operations: u32) {
        let start = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            let start = (*next).max(Instant::now());
            let rate = self.ramp.rate_at(start - self.started);
            *next = start + Duration::from_secs_f64(f64::from(operations) / rate);
            start
        };
        tokio::time::sleep_until(start).await;
    }

    /// Time since the limiter was made.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The operations per second the schedule allows now.
    pub fn rate(&self) -> f64 {
        self.ramp.rate_at(self.elapsed())
    }

    /// The schedule.
    pub fn ramp(&self) -> &RampUp {
        &self.ramp
    }
}
