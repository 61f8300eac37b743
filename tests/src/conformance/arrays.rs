//! (to be written)

#[macro_export]
macro_rules! arrays_tests {
    ($backend:expr) => {};
}
