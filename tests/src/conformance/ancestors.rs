//! (to be written)

#[macro_export]
macro_rules! ancestors_tests {
    ($backend:expr) => {};
}
