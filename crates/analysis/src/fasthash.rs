//! The aggregation maps' hasher: rustc-hash's FxHasher (the Rust compiler's), not std's SipHash.
//! Keys are small integers (latency values, PCs, thread ids) that no adversary chooses, so
//! SipHash's DoS resistance buys nothing and costs more than the rest of a sample's aggregation.

pub use rustc_hash::FxHasher;

/// A HashMap with [`FxHasher`].
pub type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;
