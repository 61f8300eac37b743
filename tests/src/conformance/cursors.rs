//! (to be written)

#[macro_export]
macro_rules! cursors_tests {
    ($backend:expr) => {};
}
