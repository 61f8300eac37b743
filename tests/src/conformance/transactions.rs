//! (to be written)

#[macro_export]
macro_rules! transactions_tests {
    ($backend:expr) => {};
}
