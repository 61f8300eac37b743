//! (to be written)

#[macro_export]
macro_rules! projections_tests {
    ($backend:expr) => {};
}
