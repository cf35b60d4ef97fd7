//! A broker family: everything brokerbench knows about one kind of broker, behind one value
//! the binary lists in its registry. A family's crate writes one [`Declaration`] (its names,
//! its driver file's type, how its broker's address is read, the driver and managed broker it
//! builds); [`Declared`] makes the registry entry of it. The engine never sees a family: it
//! gets the driver one builds.

mod declared;
mod entry;

pub use declared::{Declaration, Declared};
pub use entry::{config_of, managed_or_named, Family, Registry};
