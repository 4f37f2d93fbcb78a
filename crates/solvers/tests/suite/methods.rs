//! Every named solver builds the solver that records its name: the one registration point of
//! the names (`stolr_solvers::methods`) and the families' constructors agree.

use stolr_solvers::{
    KpcaMethod, KpcaSettings, KrrMethod, Named, NystromKrrConfig, PcaMethod, SlklConfig, SvrgPcaConfig,
};

#[test]
fn the_solvers_carry_their_method_names() {
    let settings = KpcaSettings::default();
    for &m in KpcaMethod::ALL {
        let forced = [KpcaMethod::ExactMatrixFree, KpcaMethod::ExactDense];
        let expected = if forced.contains(&m) { "exact" } else { m.name() };
        assert_eq!(m.solver(&settings).name(), expected);
    }
    for &m in PcaMethod::ALL {
        let name = match (m.batch(SvrgPcaConfig::consistent(2), None), m.streaming(None)) {
            (Some(s), None) => s.name(),
            (None, Some(s)) => s.name(),
            other => panic!("{m:?} is batch or streaming, not {other:?}"),
        };
        assert_eq!(name, m.name());
    }
    for &m in KrrMethod::ALL {
        let s = m.solver(1.0, 0.1, 5, SlklConfig::default(), NystromKrrConfig::default());
        assert_eq!(s.name(), m.name());
    }
}
