//! [`RetryPolicy`]: how often, and after what backoff, a failed attempt is tried again.

use std::time::Duration;

/// How `Db::transaction` retries: at most `max_attempts` attempts in all, sleeping a random
/// time in `[0, min(max_backoff, initial_backoff × 2^(attempt-1))]` between two ("full
/// jitter"), and never after the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The backoff cap before the second attempt.
    pub initial_backoff: Duration,
    /// The largest backoff cap.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// The sleep after failed attempt number `attempt` (1-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let cap = self
            .initial_backoff
            .saturating_mul(
                1_u32
                    .checked_shl(attempt.saturating_sub(1))
                    .unwrap_or(u32::MAX),
            )
            .min(self.max_backoff);
        cap.mul_f64(fastrand::f64())
    }
}
