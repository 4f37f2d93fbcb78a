//! A run stopped between two checkpoints and resumed from the last one ends with the same bits
//! as a run that was never stopped, for every checkpointable solver: SKPCA (PSD and general
//! iterates), SVRG-PCA, VR-PCA, the streaming solvers (MSG, capped MSG, incremental, Oja, with
//! the position in the stream) and SLKL. Also: a damaged or foreign state is refused, and a
//! stop request saves the state and returns `Interrupted`.

use std::ops::ControlFlow;

use faer::{Mat, MatRef};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use stolr_estimators::{ColumnSampling, Kernel, RandomFourierFeatures};
use stolr_model::ModelFile;
use stolr_solvers::{
    CheckpointStore, IncrementalPca, IterationReport, IterativeSolver, Msg, MsgConfig, Observer, Oja, Skpca,
    SkpcaConfig, Slkl, SlklConfig, SolverError, SolverState, StepSize, Stop, StreamPass, StreamingPca, SvrgPca,
    SvrgPcaConfig, VrPca, VrPcaConfig, matrix_rows, run,
};

fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// `(n, d)` data: three Gaussian blobs.
fn blobs(n: usize, d: usize, seed: u64) -> Mat<f64> {
    let mut r = rng(seed);
    let normal = |r: &mut Xoshiro256PlusPlus| <StandardNormal as Distribution<f64>>::sample(&StandardNormal, r);
    let centres: Vec<Vec<f64>> = (0..3).map(|_| (0..d).map(|_| 3.0 * normal(&mut r)).collect()).collect();
    Mat::from_fn(n, d, |i, j| centres[i % 3][j] + normal(&mut r))
}

fn bits(m: MatRef<'_, f64>) -> Vec<u64> {
    (0..m.ncols()).flat_map(|j| (0..m.nrows()).map(move |i| m[(i, j)].to_bits())).collect()
}

fn vec_bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Keeps the last saved state in memory; asks to stop after `request_stop_at` when set.
struct MemoryStore {
    every: usize,
    saved: Option<SolverState>,
    saved_at: Vec<usize>,
    request_stop: bool,
}

impl CheckpointStore for MemoryStore {
    fn every(&self) -> usize {
        self.every
    }

    fn load(&mut self) -> Result<Option<SolverState>, SolverError> {
        Ok(self.saved.clone())
    }

    /// Keeps the state as read back from a model file's bytes, as the CLI's store does.
    fn save(&mut self, t: usize, state: SolverState) -> Result<(), SolverError> {
        let mut file = ModelFile::new("checkpoint", serde_json::json!({ "iteration": t }));
        for (name, array) in state.arrays() {
            file.put_array(name, array.clone());
        }
        let back = ModelFile::from_bytes(&file.to_bytes()?, "checkpoint", stolr_memory::MemoryBudget::default())?;
        self.saved_at.push(t);
        self.saved = Some(SolverState::from_arrays(back.arrays()));
        Ok(())
    }

    fn stop_requested(&self) -> bool {
        self.request_stop
    }
}

/// Checkpoints into a [`MemoryStore`]; "dies" after iteration `kill_at` (breaks the loop, as a
/// SIGKILL would end it, with the iterations since the last save lost).
struct Checkpointing {
    store: MemoryStore,
    kill_at: Option<usize>,
    request_stop_at: Option<usize>,
    seen: Vec<usize>,
}

impl Checkpointing {
    fn new(every: usize, saved: Option<SolverState>) -> Self {
        Self {
            store: MemoryStore { every, saved, saved_at: Vec::new(), request_stop: false },
            kill_at: None,
            request_stop_at: None,
            seen: Vec::new(),
        }
    }
}

impl Observer for Checkpointing {
    fn on_iteration(&mut self, report: &IterationReport) -> ControlFlow<()> {
        self.seen.push(report.t);
        if Some(report.t) == self.request_stop_at {
            self.store.request_stop = true;
        }
        if Some(report.t) == self.kill_at { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    }

    fn checkpoints(&mut self) -> Option<&mut dyn CheckpointStore> {
        Some(&mut self.store)
    }
}

/// Runs `build()` to the end without checkpoints, then again killed after `kill_at` with saves
/// every `every` iterations, then a third fresh build resumed from the last save; the two
/// finished solvers' `output` bits must agree, and the resumed run must start after the save.
fn assert_resume_is_exact<S: IterativeSolver>(
    mut build: impl FnMut(&mut Xoshiro256PlusPlus) -> S,
    output: impl Fn(&S, Stop) -> Vec<u64>,
    every: usize,
    kill_at: usize,
) {
    assert!(!kill_at.is_multiple_of(every), "kill between two saves");
    let mut caller = rng(42);
    let mut whole = build(&mut caller);
    let stop = run(&mut whole, &mut caller, &mut ()).unwrap();
    let expected = output(&whole, stop);

    let mut caller = rng(42);
    let mut killed = build(&mut caller);
    let mut first = Checkpointing::new(every, None);
    first.kill_at = Some(kill_at);
    assert_eq!(run(&mut killed, &mut caller, &mut first).unwrap(), Stop::Interrupted);
    let last_save = kill_at / every * every;
    assert_eq!(first.store.saved_at.last(), Some(&last_save));
    let saved = first.store.saved.take().expect("a state was saved");

    let mut caller = rng(42);
    let mut resumed = build(&mut caller);
    let mut second = Checkpointing::new(every, Some(saved));
    let stop = run(&mut resumed, &mut caller, &mut second).unwrap();
    assert_eq!(second.seen.first(), Some(&(last_save + 1)), "the resumed run starts after the save");
    assert_eq!(output(&resumed, stop), expected, "resumed run differs from the uninterrupted one");
}

#[test]
fn skpca_resumes_with_the_same_bits() {
    let x = blobs(80, 5, 1);
    let gauss = Kernel::gaussian(2.0);
    let config = SkpcaConfig { tau: 0.5, iterations: 37, ..Default::default() };
    // A PSD iterate (random Fourier features), whose state includes the carried UᵀU.
    assert_resume_is_exact(
        |_| Skpca::new(config.clone(), Box::new(RandomFourierFeatures::new(x.as_ref(), gauss, 20).unwrap())).unwrap(),
        |s, _| {
            let p = s.eigenpairs().unwrap();
            [vec_bits(&p.values), bits(p.vectors.as_ref())].concat()
        },
        5,
        23,
    );
    // A general iterate (column sampling, U diag(s) Vᵀ).
    assert_resume_is_exact(
        |_| Skpca::new(config.clone(), Box::new(ColumnSampling::new(x.as_ref(), gauss, 6, false).unwrap())).unwrap(),
        |s, _| {
            let p = s.eigenpairs().unwrap();
            [vec_bits(&p.values), bits(p.vectors.as_ref())].concat()
        },
        4,
        17,
    );
}

#[test]
fn linear_pca_solvers_resume_with_the_same_bits() {
    let x = blobs(300, 8, 2);
    let svrg = SvrgPcaConfig { max_epochs: 12, ..SvrgPcaConfig::consistent(3) };
    assert_resume_is_exact(|r| SvrgPca::new(x.as_ref(), svrg.clone(), r).unwrap(), |s, _| bits(s.snapshot()), 3, 7);
    let vr = VrPcaConfig::new(3, 9);
    assert_resume_is_exact(|r| VrPca::new(x.as_ref(), vr.clone(), r).unwrap(), |s, _| bits(s.snapshot()), 2, 5);
}

/// A stream pass owns a `&mut` to its solver, so the solver lives in a box the pass borrows for
/// the whole test: `build` leaks one per call (a few kilobytes).
/// `batch` rows per step ([`StreamPass::with_batch`]; 1 is the plain pass).
fn streaming_case(make: impl Fn(&mut Xoshiro256PlusPlus) -> Box<dyn StreamingPca>, batch: usize) {
    let x: &'static Mat<f64> = Box::leak(Box::new(blobs(200, 6, 3)));
    assert_resume_is_exact(
        |r| StreamPass::new(Box::leak(make(r)), matrix_rows(x.as_ref())).with_batch(batch).unwrap(),
        |p, stop| {
            assert_eq!(stop, Stop::EndOfStream);
            assert_eq!(p.rows_read(), 200);
            [bits(p.solver().subspace().as_ref()), vec![p.solver().samples_seen() as u64]].concat()
        },
        if batch == 1 { 25 } else { 5 },
        if batch == 1 { 93 } else { 17 },
    );
}

#[test]
fn streaming_solvers_resume_at_their_position_in_the_stream() {
    let step = StepSize::ScaleFree { c: 1.0 };
    streaming_case(|r| Box::new(Msg::new(MsgConfig { step, ..MsgConfig::msg(6, 2) }, r).unwrap()), 1);
    streaming_case(|r| Box::new(Msg::new(MsgConfig { step, cap: Some(3), ..MsgConfig::msg(6, 2) }, r).unwrap()), 1);
    streaming_case(|_| Box::new(IncrementalPca::new(6, 2).unwrap()), 1);
    streaming_case(|r| Box::new(Oja::new(6, 2, step, r).unwrap()), 1);
    // Mini-batches of 7 rows (the last one shorter).
    streaming_case(|r| Box::new(Msg::new(MsgConfig { step, cap: Some(3), ..MsgConfig::msg(6, 2) }, r).unwrap()), 7);
}

#[test]
fn slkl_resumes_with_the_same_bits() {
    let x = blobs(150, 3, 4);
    let y: Vec<f64> = (0..150).map(|i| (x[(i, 0)] * 0.7).sin() + 0.1 * x[(i, 1)]).collect();
    let kernel = Kernel::gaussian(1.5);
    let config = SlklConfig { lambda: 0.5, nu: 0.01, landmarks: 30, max_epochs: 8, epsilon: 0.0, ..Default::default() };
    assert_resume_is_exact(
        |r| Slkl::new(x.as_ref(), &y, &kernel, config.clone(), r).unwrap(),
        |s, stop| {
            let model = s.model(stop).unwrap();
            [vec_bits(&model.weights), vec_bits(&[model.objective])].concat()
        },
        40,
        131,
    );
}

#[test]
fn a_stop_request_saves_and_interrupts() {
    let x = blobs(60, 4, 5);
    let gauss = Kernel::gaussian(2.0);
    let config = SkpcaConfig { tau: 0.5, iterations: 30, ..Default::default() };
    let mut solver = Skpca::new(config, Box::new(RandomFourierFeatures::new(x.as_ref(), gauss, 10).unwrap())).unwrap();
    let mut observer = Checkpointing::new(100, None);
    observer.request_stop_at = Some(7);
    let err = run(&mut solver, &mut rng(1), &mut observer).unwrap_err();
    assert!(matches!(err, SolverError::Interrupted { t: 7 }), "{err}");
    assert_eq!(observer.store.saved_at, vec![7]);
}

#[test]
fn damaged_or_foreign_states_are_refused() {
    let x = blobs(60, 4, 6);
    let gauss = Kernel::gaussian(2.0);
    let config = SkpcaConfig { tau: 0.5, iterations: 30, ..Default::default() };
    let build =
        || Skpca::new(config.clone(), Box::new(RandomFourierFeatures::new(x.as_ref(), gauss, 10).unwrap())).unwrap();
    let mut observer = Checkpointing::new(5, None);
    observer.kill_at = Some(12);
    run(&mut build(), &mut rng(1), &mut observer).unwrap();
    let good = observer.store.saved.take().unwrap();

    // Another seed: the loop's generator started elsewhere.
    let err = run(&mut build(), &mut rng(2), &mut Checkpointing::new(5, Some(good.clone()))).unwrap_err();
    assert!(matches!(err, SolverError::Checkpoint { .. }), "{err}");

    // A state of another solver (SLKL's arrays only).
    let mut foreign = SolverState::new();
    foreign.put_vector("slkl-mu", &[0.0; 3]);
    let err = run(&mut build(), &mut rng(1), &mut Checkpointing::new(5, Some(foreign))).unwrap_err();
    assert!(matches!(err, SolverError::Checkpoint { .. }), "{err}");

    // The iterate's factor with the wrong number of rows (other data).
    let mut damaged = SolverState::from_arrays(good.arrays());
    damaged.put_matrix("skpca-u", Mat::<f64>::zeros(59, good.vector("skpca-s", None).unwrap().len()).as_ref());
    let err = run(&mut build(), &mut rng(1), &mut Checkpointing::new(5, Some(damaged))).unwrap_err();
    assert!(matches!(err, SolverError::Checkpoint { .. }), "{err}");

    // A solver without checkpoint support says so instead of running.
    struct Plain(usize);
    impl IterativeSolver for Plain {
        fn step(&mut self, _: &mut dyn rand::Rng) -> Result<stolr_solvers::StepReport, SolverError> {
            self.0 += 1;
            Ok(stolr_solvers::StepReport {
                t: self.0,
                stop: (self.0 >= 3).then_some(Stop::MaxIterations),
                ..Default::default()
            })
        }
    }
    let err = run(&mut Plain(0), &mut rng(1), &mut Checkpointing::new(2, None)).unwrap_err();
    assert!(matches!(err, SolverError::Checkpoint { .. }), "{err}");
}
