//! Every estimator and kernel product gives the same bits on one thread and on several: random
//! Fourier and Maclaurin features, column sampling (one column too, a matrix–vector product),
//! the kernel matrix and cross kernel, the tiled kernel operator (plain, centred and on sampled
//! rows), kernel row means, cross-kernel panels and the bandwidth rule. Shapes cross the
//! thresholds where work is split. Its own test binary: it sets faer's global parallelism, so
//! everything runs in one test, one setting after the other.

mod common;

use common::{gaussian_data, rng};
use faer::{Mat, Par};
use stolr_estimators::{
    Centered, ColumnSampling, CrossKernelPanels, Kernel, KernelOperator, KernelSampler, OperatorCentering,
    RandomFourierFeatures, RandomMaclaurin, bandwidth_estimate, kernel_row_means,
};

fn bits(m: &Mat<f64>) -> Vec<u64> {
    (0..m.ncols()).flat_map(|j| (0..m.nrows()).map(move |i| m[(i, j)].to_bits())).collect()
}

fn vec_bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The draw of `sampler` with seed 17, as bits (`zeta`, then `chi` when present).
fn draw(sampler: &mut dyn KernelSampler) -> Vec<u64> {
    let f = sampler.sample(&mut rng(17)).unwrap();
    let chi = f.chi.as_ref().map(bits).unwrap_or_default();
    [bits(&f.zeta), chi].concat()
}

fn run(par: Par) -> Vec<(&'static str, Vec<u64>)> {
    faer::set_global_parallelism(par);
    let x = gaussian_data(5000, 7, 2.0, 4);
    let gaussian = Kernel::gaussian(1.3);
    let laplacian = Kernel::laplacian(2.0);
    let poly = Kernel::polynomial(7.0, 1.0, 2);
    let mut out = vec![
        ("rff", draw(&mut RandomFourierFeatures::new(x.as_ref(), gaussian, 9).unwrap())),
        ("rff centred", draw(&mut Centered::new(RandomFourierFeatures::new(x.as_ref(), laplacian, 9).unwrap()))),
        ("maclaurin", draw(&mut RandomMaclaurin::new(x.as_ref(), poly, 5).unwrap())),
        ("maclaurin, one feature", draw(&mut RandomMaclaurin::new(x.as_ref(), poly, 1).unwrap())),
        ("columns", draw(&mut ColumnSampling::new(x.as_ref(), gaussian, 6, false).unwrap())),
        ("columns, one column", draw(&mut ColumnSampling::new(x.as_ref(), gaussian, 1, false).unwrap())),
        ("columns-sym", draw(&mut ColumnSampling::new(x.as_ref(), laplacian, 3, true).unwrap())),
    ];
    let wide = gaussian_data(3000, 40, 1.0, 5);
    out.push(("cross, one row", bits(&gaussian.cross(wide.as_ref(), wide.as_ref().subrows(7, 1)))));
    out.push(("columns, one index", bits(&poly.columns(wide.as_ref(), &[11]))));
    let small = x.as_ref().subrows(0, 900);
    out.push(("matrix", bits(&gaussian.matrix(small))));
    let (means, grand) = kernel_row_means(small, &laplacian);
    out.push(("kernel_row_means", [vec_bits(&means), vec_bits(&[grand])].concat()));

    let v = gaussian_data(2100, 3, 1.0, 6);
    let rows = x.as_ref().subrows(0, 2100);
    for (name, centering) in [("operator", OperatorCentering::None), ("operator centred", OperatorCentering::Compute)] {
        let op = KernelOperator::new(rows, gaussian, centering, 128, par).unwrap();
        out.push((name, bits(&op.apply(v.as_ref(), par).unwrap())));
        out.push((name, bits(&op.apply(v.as_ref().subcols(0, 1), par).unwrap())));
        let sampled: Vec<usize> = (0..700).map(|i| (i * 37) % 2100).collect();
        out.push((name, bits(&op.apply_rows(&sampled, v.as_ref(), par).unwrap())));
        out.push((name, bits(&op.apply_row_block(700..1500, v.as_ref(), par).unwrap())));
    }

    let panels = CrossKernelPanels::new(&gaussian, x.as_ref(), x.as_ref().subrows(0, 20)).unwrap();
    let mut sum = Mat::<f64>::zeros(20, 1);
    panels
        .for_each_block(
            1000,
            |_| {},
            |block| {
                for panel in block.iter() {
                    for i in 0..panel.kernel.ncols() {
                        for j in 0..20 {
                            sum[(j, 0)] += panel.kernel[(j, i)];
                        }
                    }
                }
                Ok::<(), ()>(())
            },
        )
        .unwrap();
    out.push(("cross panels", bits(&sum)));

    let b = bandwidth_estimate(x.as_ref(), 20.0, 100_000, &mut rng(3)).unwrap();
    out.push(("bandwidth", vec_bits(&[b.sigma])));
    out
}

#[test]
fn estimators_do_not_depend_on_the_thread_count() {
    let one = run(Par::Seq);
    for par in [Par::rayon(2), Par::rayon(4)] {
        let several = run(par);
        for ((name, a), (_, b)) in one.iter().zip(&several) {
            assert!(a == b, "{name}: the bits differ between one thread and {par:?}");
        }
    }
}
