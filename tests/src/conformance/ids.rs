//! (to be written)

#[macro_export]
macro_rules! ids_tests {
    ($backend:expr) => {};
}
