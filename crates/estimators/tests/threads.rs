//! Random Fourier features give the same bits on one thread and on several: rows are computed
//! in fixed blocks, each by the same operations. Its own test binary: it sets faer's global
//! parallelism.

mod common;

use common::{gaussian_data, rng};
use faer::Par;
use stolr_estimators::{Kernel, KernelSampler, RandomFourierFeatures};

#[test]
fn rff_draws_do_not_depend_on_the_thread_count() {
    let x = gaussian_data(5000, 7, 2.0, 4);
    let draw = |par: Par| {
        faer::set_global_parallelism(par);
        let mut s = RandomFourierFeatures::new(x.as_ref(), Kernel::Gaussian { sigma: 1.3 }, 9).unwrap();
        s.sample(&mut rng(17)).unwrap()
    };
    let one = draw(Par::Seq);
    let several = draw(Par::rayon(3));
    assert_eq!(one, several);
}
