//! (to be written)

#[macro_export]
macro_rules! scale_tests {
    ($backend:expr) => {};
}
