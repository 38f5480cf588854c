//! The Lua scripts, one file per script under `scripts/`, each with a header listing its
//! KEYS and ARGV. `lib.lua` holds helpers prepended to each one. redis-rs sends them with
//! EVALSHA and loads them again on NOSCRIPT (after a restart or `SCRIPT FLUSH`).

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("scripts/lib.lua"),
                include_str!(concat!("scripts/", $file))
            ))
        });
    };
}

script!(OFFER, "offer.lua");
script!(TRANSFER, "transfer.lua");
script!(CONTAINS, "contains.lua");
script!(REMOVE, "remove.lua");
script!(CLEAR, "clear.lua");

macro_rules! reliable_script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("scripts/lib.lua"),
                include_str!("scripts/reliable_lib.lua"),
                include_str!(concat!("scripts/", $file))
            ))
        });
    };
}

reliable_script!(RELIABLE_OFFER, "reliable_offer.lua");
reliable_script!(RELIABLE_TRANSFER, "reliable_transfer.lua");
reliable_script!(RELIABLE_ACK, "reliable_ack.lua");
reliable_script!(RELIABLE_NACK, "reliable_nack.lua");
reliable_script!(RELIABLE_CANCEL, "reliable_cancel.lua");
reliable_script!(RELIABLE_RESCHEDULE, "reliable_reschedule.lua");
reliable_script!(RELIABLE_STATS, "reliable_stats.lua");
reliable_script!(RELIABLE_DEAD, "reliable_dead.lua");
reliable_script!(RELIABLE_SETTINGS, "reliable_settings.lua");
reliable_script!(RELIABLE_LEASE, "reliable_lease.lua");
reliable_script!(RELIABLE_CONSUMERS, "reliable_consumers.lua");

/// The source of the offer script, for benchmarks that run it through `redis-benchmark`.
pub fn offer_script_source() -> String {
    concat!(
        include_str!("scripts/lib.lua"),
        include_str!("scripts/offer.lua")
    )
    .to_owned()
}
