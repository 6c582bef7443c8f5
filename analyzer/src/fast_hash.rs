//! A fast hasher for the analyzer's own keys: canonical value hashes, interned tool names,
//! hashes used as map keys. Not keyed: only for data the analysis looks up millions of times,
//! where SipHash's per-call cost dominated.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// A fast, non-cryptographic 64-bit hasher for canonical value hashes: eight bytes a round
/// (multiply and rotate), then a full avalanche at the end. Value hashes are computed for every
/// node of every payload, where SipHash's per-call cost dominated; collisions are checked by
/// equality wherever a hash picks a location.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NodeHasher(u64);

const NODE_HASH_MUL: u64 = 0x9E37_79B9_7F4A_7C15;

impl NodeHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(NODE_HASH_MUL);
    }
}

/// The 1 to 7 bytes of `rest` as a little-endian word padded with zeros, read with two
/// overlapping loads instead of a variable-length copy (which calls `memcpy`).
#[inline]
fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    if n >= 4 {
        let low = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let high = u32::from_le_bytes([rest[n - 4], rest[n - 3], rest[n - 2], rest[n - 1]]);
        // The loads overlap on equal bytes at equal positions, so OR joins them.
        u64::from(low) | (u64::from(high) << ((n - 4) * 8))
    } else {
        // n is 1, 2 or 3: bytes 0, n / 2 and n - 1 cover every position.
        u64::from(rest[0])
            | (u64::from(rest[n / 2]) << (n / 2 * 8))
            | (u64::from(rest[n - 1]) << ((n - 1) * 8))
    }
}

impl Hasher for NodeHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // The length keeps "a" and "a\0" apart.
            self.mix(tail_word(rest) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, value: u8) {
        self.mix(u64::from(value) | 0x100);
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.mix(value);
    }

    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.mix(value as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // murmur3's fmix64.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A `HashMap` with [`NodeHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<NodeHasher>>;

/// Distinct keys in first-seen order, each found by its position: a scan while there are few
/// (most JSON objects), a [`FastMap`] once there are more than [`KeyIndex::SCAN_LIMIT`]. The
/// values live beside it, in a vector of the same order.
#[derive(Debug, Clone)]
pub(crate) struct KeyIndex<K> {
    keys: Vec<K>,
    positions: FastMap<K, usize>,
}

impl<K> Default for KeyIndex<K> {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            positions: FastMap::default(),
        }
    }
}

impl<K: Hash + Eq + Clone> KeyIndex<K> {
    /// Up to this many keys are searched by a scan.
    pub const SCAN_LIMIT: usize = 16;

    /// The position of `key`, if it was pushed.
    pub fn position<Q>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.keys.len() <= Self::SCAN_LIMIT {
            self.keys.iter().position(|k| k.borrow() == key)
        } else {
            self.positions.get(key).copied()
        }
    }

    /// Adds a key not yet present (see [`KeyIndex::position`]); returns its position.
    pub fn push(&mut self, key: K) -> usize {
        let at = self.keys.len();
        self.keys.push(key);
        if self.keys.len() > Self::SCAN_LIMIT {
            if self.positions.is_empty() {
                // Crossing the limit: index every key so far.
                for (i, k) in self.keys.iter().enumerate() {
                    self.positions.insert(k.clone(), i);
                }
            } else {
                self.positions.insert(self.keys[at].clone(), at);
            }
        }
        at
    }

    /// The keys, in the order pushed.
    pub fn keys(&self) -> &[K] {
        &self.keys
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{Hash, Hasher};

    use super::{KeyIndex, NodeHasher};

    #[test]
    fn key_index_finds_keys_by_scan_and_by_map() {
        let mut index: KeyIndex<String> = KeyIndex::default();
        for i in 0..40 {
            assert_eq!(index.position(format!("k{i}").as_str()), None);
            assert_eq!(index.push(format!("k{i}")), i);
            // Every key so far is found, below and above the scan limit.
            for j in 0..=i {
                assert_eq!(index.position(format!("k{j}").as_str()), Some(j), "{i} {j}");
            }
        }
        assert_eq!(index.keys().len(), 40);
        assert_eq!(index.keys()[39], "k39");
        assert_eq!(index.position("absent"), None);
    }

    fn hash_of(value: impl Hash) -> u64 {
        let mut hasher = NodeHasher::default();
        value.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn tail_words_are_the_zero_padded_bytes() {
        for n in 1..8usize {
            let bytes: Vec<u8> = (0..n as u8).map(|i| 0xA0 | i).collect();
            let mut padded = [0u8; 8];
            padded[..n].copy_from_slice(&bytes);
            assert_eq!(
                super::tail_word(&bytes),
                u64::from_le_bytes(padded),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn lengths_and_contents_are_told_apart() {
        assert_ne!(hash_of("a"), hash_of("a\0"));
        assert_ne!(hash_of("ab"), hash_of("ba"));
        assert_ne!(hash_of(1u64), hash_of(2u64));
        assert_eq!(hash_of("same text"), hash_of("same text"));
    }
}
