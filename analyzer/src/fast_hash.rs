//! A fast hasher for the analyzer's own keys: canonical value hashes, interned tool names,
//! hashes used as map keys. Not keyed: only for data the analysis looks up millions of times,
//! where SipHash's per-call cost dominated.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            // The length keeps "a" and "a\0" apart.
            self.mix(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
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

#[cfg(test)]
mod tests {
    use std::hash::{Hash, Hasher};

    use super::NodeHasher;

    fn hash_of(value: impl Hash) -> u64 {
        let mut hasher = NodeHasher::default();
        value.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn lengths_and_contents_are_told_apart() {
        assert_ne!(hash_of("a"), hash_of("a\0"));
        assert_ne!(hash_of("ab"), hash_of("ba"));
        assert_ne!(hash_of(1u64), hash_of(2u64));
        assert_eq!(hash_of("same text"), hash_of("same text"));
    }
}
