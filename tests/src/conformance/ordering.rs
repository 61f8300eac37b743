//! (to be written)

#[macro_export]
macro_rules! ordering_tests {
    ($backend:expr) => {};
}
