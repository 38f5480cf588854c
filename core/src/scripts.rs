//! The Lua scripts, one file per script under `scripts/`, each with a header listing its
//! KEYS and ARGV. `lib.lua` (and for the reliable queue `reliable_lib.lua`) holds helpers;
//! each script gets the ones it uses (see [`assemble`]). redis-rs sends them with EVALSHA
//! and loads them again on NOSCRIPT (after a restart or `SCRIPT FLUSH`).

use std::collections::HashSet;
use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(&assemble(
                &[include_str!("scripts/lib.lua")],
                include_str!(concat!("scripts/", $file)),
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
            Script::new(&assemble(
                &[
                    include_str!("scripts/lib.lua"),
                    include_str!("scripts/reliable_lib.lua"),
                ],
                include_str!(concat!("scripts/", $file)),
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

/// Makes every script (and the default wheel levels) now, on the thread that makes a
/// client, before any task of it runs: a process forked while another thread was making
/// one (a transfer task's first pass) found it being made forever in the child, whose
/// first transfer pass hung.
pub(crate) fn make_all() {
    for script in [
        &OFFER,
        &TRANSFER,
        &CONTAINS,
        &REMOVE,
        &CLEAR,
        &RELIABLE_OFFER,
        &RELIABLE_TRANSFER,
        &RELIABLE_ACK,
        &RELIABLE_NACK,
        &RELIABLE_CANCEL,
        &RELIABLE_RESCHEDULE,
        &RELIABLE_STATS,
        &RELIABLE_DEAD,
        &RELIABLE_SETTINGS,
        &RELIABLE_LEASE,
        &RELIABLE_CONSUMERS,
    ] {
        LazyLock::force(script);
    }
    LazyLock::force(&crate::reliable_queue::DEFAULT_WHEEL);
}

/// The source of the offer script, for benchmarks that run it through `redis-benchmark`.
pub fn offer_script_source() -> String {
    assemble(
        &[include_str!("scripts/lib.lua")],
        include_str!("scripts/offer.lua"),
    )
}

/// A part of a lib: a helper (`local function NAME(` at the start of a line up to the
/// first line that is just `end`, with the comment lines right above it), or code that
/// every script keeps (the lib's constants).
enum Part<'a> {
    Helper(&'a str, String),
    Always(String),
}

fn parts(lib: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut loose: Vec<&str> = Vec::new();
    let mut helper: Option<(&str, Vec<&str>)> = None;
    for line in lib.lines() {
        if let Some((name, lines)) = &mut helper {
            lines.push(line);
            if line == "end" {
                parts.push(Part::Helper(name, lines.join("\n") + "\n"));
                helper = None;
            }
            continue;
        }
        let Some(rest) = line.strip_prefix("local function ") else {
            loose.push(line);
            continue;
        };
        let name = rest.split('(').next().unwrap_or_default().trim();
        // The comment (and blank) lines right above a helper go with it.
        let keep = loose.len()
            - loose
                .iter()
                .rev()
                .take_while(|l| l.trim().is_empty() || l.trim_start().starts_with("--"))
                .count();
        if loose[..keep].iter().any(|l| !l.trim().is_empty()) {
            parts.push(Part::Always(loose[..keep].join("\n") + "\n"));
        }
        let mut lines = loose.split_off(keep);
        loose.clear();
        lines.push(line);
        helper = Some((name, lines));
    }
    assert!(
        helper.is_none(),
        "a helper in a Lua lib does not end with a line `end`"
    );
    if loose.iter().any(|l| !l.trim().is_empty()) {
        parts.push(Part::Always(loose.join("\n") + "\n"));
    }
    parts
}

/// The names in Lua code, full-line comments left out (a name in a comment at the end of
/// a line counts: that only keeps a helper too many).
fn names(code: &str) -> impl Iterator<Item = &str> {
    code.lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| !w.is_empty())
}

/// A script's source: the code of `libs` that every script keeps, the helpers that `body`
/// uses directly or through other helpers (in the libs' order, so that each is defined
/// before its callers), then `body`. A script defines each helper again on every call,
/// and the whole reliable_lib.lua cost about 15 us a call on a quiet server.
fn assemble(libs: &[&str], body: &str) -> String {
    let libs: Vec<Vec<Part<'_>>> = libs.iter().map(|l| parts(l)).collect();
    let mut wanted: HashSet<&str> = names(body).collect();
    for part in libs.iter().flatten() {
        if let Part::Always(code) = part {
            wanted.extend(names(code));
        }
    }
    loop {
        let before = wanted.len();
        for part in libs.iter().flatten() {
            if let Part::Helper(name, code) = part {
                if wanted.contains(name) {
                    wanted.extend(names(code));
                }
            }
        }
        if wanted.len() == before {
            break;
        }
    }
    let mut source = String::new();
    for part in libs.iter().flatten() {
        match part {
            Part::Always(code) => source.push_str(code),
            Part::Helper(name, code) if wanted.contains(name) => source.push_str(code),
            Part::Helper(..) => {}
        }
    }
    source.push_str(body);
    source
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_gets_the_helpers_it_uses_and_theirs() {
        let lib = "-- lib\nlocal K = 1\n\n-- a\nlocal function a()\n  return K\nend\n\
                   local function b()\n  return a()\nend\nlocal function c()\nend\n";
        let source = assemble(&[lib], "return b()\n");
        assert!(source.contains("local K = 1"));
        assert!(source.contains("-- a\nlocal function a()"));
        assert!(source.contains("local function b()"));
        assert!(!source.contains("local function c()"));
        assert!(source.ends_with("return b()\n"));
        assert!(source.find("function a").unwrap() < source.find("function b").unwrap());
    }

    #[test]
    fn every_helper_of_the_libs_is_found() {
        for lib in [
            include_str!("scripts/lib.lua"),
            include_str!("scripts/reliable_lib.lua"),
        ] {
            let defined = lib.matches("\nlocal function ").count();
            let helpers = parts(lib)
                .iter()
                .filter(|p| matches!(p, Part::Helper(..)))
                .count();
            assert_eq!(helpers, defined);
        }
    }

    #[test]
    fn the_ack_script_leaves_out_what_it_does_not_use() {
        let libs = [
            include_str!("scripts/lib.lua"),
            include_str!("scripts/reliable_lib.lua"),
        ];
        let ack = assemble(&libs, include_str!("scripts/reliable_ack.lua"));
        assert!(ack.contains("local function forget_ids("));
        assert!(!ack.contains("local function cascade_entry("));
    }
}
