//! Seeded random streams: every random choice of a reproduction comes from one.
//!
//! Stream `index` of `seed` is `Xoshiro256PlusPlus::seed_from_u64(seed)` advanced by `index`
//! jumps of `2¹²⁸` steps, so streams of one seed never overlap. Stream 0 is the plain seeded
//! generator. The `stolr` CLI derives its streams the same way (`stolr_cli::rng::stream`),
//! which lets a reproduction redraw exactly what a CLI run drew.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Stream `index` of `seed`: the seed's generator advanced by `index` jumps of `2¹²⁸` steps.
pub fn stream(seed: u64, index: u32) -> Xoshiro256PlusPlus {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for _ in 0..index {
        rng.jump();
    }
    rng
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_jumps_of_the_seeded_generator() {
        let mut plain = Xoshiro256PlusPlus::seed_from_u64(9);
        assert_eq!(stream(9, 0).next_u64(), plain.next_u64());
        let mut jumped = Xoshiro256PlusPlus::seed_from_u64(9);
        jumped.jump();
        jumped.jump();
        assert_eq!(stream(9, 2).next_u64(), jumped.next_u64());
        assert_ne!(stream(9, 1).next_u64(), stream(9, 2).next_u64());
    }
}
