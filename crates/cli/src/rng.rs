//! Seeded random streams for the CLI.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Independent random streams, one per purpose, so that changing one option (say `--sigma`)
/// does not change the draws of another stage: stream `index` is the seed's generator advanced
/// by `index` jumps of 2¹²⁸ steps.
pub fn stream(seed: u64, index: u32) -> Xoshiro256PlusPlus {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for _ in 0..index {
        rng.jump();
    }
    rng
}
