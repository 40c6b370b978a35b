//! The domain: deliveries, fingerprints, canonical items, money, observations, replay records,
//! runs and connector rules, as plain values. Pure code: no AWS type, no I/O, no port.

pub mod canonical_json;
pub mod connector;
pub mod currency;
pub mod definition;
pub mod envelope;
pub mod fingerprint;
pub mod hashing;
pub mod ids;
pub mod item;
pub mod mapping;
pub mod model;
pub mod money;
pub mod normalize;
pub mod quantity;
pub mod quote;
pub mod reject;
pub mod source_health;
pub mod terms;
pub mod timestamp;
pub mod verification;
