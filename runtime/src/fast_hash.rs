//! The hasher of the runtime's own caches (pipelines, bind groups, launch sets, optimizer
//! states). Their keys are the runtime's (addresses, buffer ids, a few words), never a
//! user's text, so they need no defence against chosen collisions; std's SipHash was the
//! largest single cost of recording a small training step (13% of the host's time per
//! step on our 2-core machines, `perf`), where this multiply-rotate hash is a few cycles
//! a word. It is the hash rustc uses for its own tables (FxHash).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map hashed with [`FastHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// FxHash: each word rotated into the state and multiplied by an odd constant.
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        // The length first: a tail padded with zeros must not equal a longer key's.
        self.add(bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash(x: impl Hash) -> u64 {
        BuildHasherDefault::<FastHasher>::default().hash_one(x)
    }

    /// Keys that differ in one word, in a tail shorter than a word, or only in length hash
    /// apart; equal keys hash alike.
    #[test]
    fn keys_that_differ_hash_apart() {
        assert_eq!(hash((1u32, "adam")), hash((1u32, "adam")));
        assert_ne!(hash((1u32, "adam")), hash((2u32, "adam")));
        assert_ne!(hash("adam"), hash("adan"));
        assert_ne!(hash("a"), hash("a\0"));
        assert_ne!(hash([0u32; 3].as_slice()), hash([0u32; 4].as_slice()));
        let mut map = FastMap::default();
        for i in 0..1000u64 {
            map.insert((i, vec![i as u32; (i % 5) as usize]), i);
        }
        assert!((0..1000u64).all(|i| map[&(i, vec![i as u32; (i % 5) as usize])] == i));
    }
}
