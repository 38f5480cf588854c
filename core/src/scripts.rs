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

/// The source of the offer script, for benchmarks that run it through `redis-benchmark`.
pub fn offer_script_source() -> String {
    concat!(
        include_str!("scripts/lib.lua"),
        include_str!("scripts/offer.lua")
    )
    .to_owned()
}
