//! The in-place Rayleigh–Ritz step gives the same bits on one thread and on several (its
//! Gram matrix is summed over row groups fixed by `n`, and every row of the new factor is
//! computed by the same operations). Its own test binary: it sets faer's global parallelism.

use faer::{Mat, Par};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_lowrank::{SymLowRank, shrink_psd_in_place};

fn run(par: Par) -> SymLowRank {
    faer::set_global_parallelism(par);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    // Several row groups of the Gram matrix and several blocks of the in-place product.
    let (n, a) = (3 * 4096 + 77, 6);
    let mut z = SymLowRank::zeros(n);
    for t in 1..=4 {
        let eta = 2.0 / t as f64;
        let zeta = Mat::from_fn(n, a, |_, _| <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng));
        shrink_psd_in_place(&mut z, zeta.as_ref(), eta, eta * 50.0).unwrap();
    }
    z
}

#[test]
fn same_bits_on_one_and_several_threads() {
    let one = run(Par::Seq);
    let several = run(Par::rayon(3));
    assert!(one.rank() > 0);
    assert_eq!(one, several);
}
