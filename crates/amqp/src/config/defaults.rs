//! The defaults serde gives the driver file's fields that several of its sections share: on,
//! and one.

pub(super) fn default_true() -> bool {
    true
}
pub(super) fn default_one() -> u32 {
    1
}
