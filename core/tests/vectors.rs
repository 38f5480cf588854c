//! The shared vectors of tests/vectors/ agree with the Rust codec and with
//! `struct.pack('Bc0Lc0', ...)` run by a live Redis.

mod common;

use common::RedisServer;
use std::time::Duration;

struct Vector {
    name: String,
    id: Vec<u8>,
    value: Vec<u8>,
    packed: Vec<u8>,
}

fn vectors() -> Vec<Vector> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/packing.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| Vector {
            name: v["name"].as_str().unwrap().to_owned(),
            id: hex::decode(v["id"].as_str().unwrap()).unwrap(),
            value: hex::decode(v["value"].as_str().unwrap()).unwrap(),
            packed: hex::decode(v["packed"].as_str().unwrap()).unwrap(),
        })
        .collect()
}

#[test]
fn rust_codec_matches_every_vector() {
    let vs = vectors();
    assert!(vs.len() >= 8);
    for v in vs {
        assert_eq!(
            delayq::codec::pack(&v.id, &v.value).unwrap(),
            v.packed,
            "{}",
            v.name
        );
        let (id, value) = delayq::codec::unpack(&v.packed).unwrap();
        assert_eq!((id, value), (&v.id[..], &v.value[..]), "{}", v.name);
    }
}

#[tokio::test]
async fn live_redis_struct_pack_matches_every_vector() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    for v in vectors() {
        let packed: Vec<u8> = redis::Script::new(
            "return struct.pack('Bc0Lc0', string.len(ARGV[1]), ARGV[1], string.len(ARGV[2]), ARGV[2])",
        )
        .arg(&v.id)
        .arg(&v.value)
        .invoke_async(&mut conn)
        .await
        .unwrap();
        assert_eq!(packed, v.packed, "Redis packs {} differently", v.name);
        let (id, value): (Vec<u8>, Vec<u8>) = redis::Script::new(
            "local id, value = struct.unpack('Bc0Lc0', ARGV[1]) return {id, value}",
        )
        .arg(&v.packed)
        .invoke_async(&mut conn)
        .await
        .unwrap();
        assert_eq!((id, value), (v.id.clone(), v.value.clone()), "{}", v.name);
    }
}

#[tokio::test]
async fn offered_entries_are_stored_as_packed_by_redis() {
    let server = RedisServer::start();
    let client = delayq::Client::connect(&server.url()).await.unwrap();
    let queue = client.delayed_queue("vectors").unwrap();
    let raw = redis::Client::open(server.url()).unwrap();
    let mut conn = raw.get_multiplexed_async_connection().await.unwrap();
    for v in vectors() {
        queue.clear().await.unwrap();
        queue
            .offer(&v.value, Duration::from_secs(3600))
            .await
            .unwrap();
        let stored: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg("redisson_delay_queue:{vectors}")
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(stored.len(), 1);
        let (id, value) = delayq::codec::unpack(&stored[0]).unwrap();
        assert_eq!(id.len(), 8);
        assert_eq!(value, &v.value[..], "{}", v.name);
        assert_eq!(delayq::codec::pack(id, value).unwrap(), stored[0]);
        assert_eq!(queue.read_all().await.unwrap(), vec![v.value.clone()]);
    }
}
