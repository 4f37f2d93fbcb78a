//! A stop request (Ctrl-C in Python) ends a pass of kernel panels before its next block. Its own
//! test binary: the request is process-wide and would stop the other tests' passes.

use faer::Mat;
use stolr_estimators::{CrossKernelPanels, Kernel, interrupt};

#[test]
fn a_requested_stop_ends_the_panel_pass_and_clearing_it_restores_the_whole_pass() {
    let x = Mat::from_fn(4000, 3, |i, j| ((i * 7 + j * 3) % 11) as f64 * 0.1);
    let landmarks = x.subrows(0, 10).to_owned();
    let kernel = Kernel::gaussian(1.0);
    let panels = CrossKernelPanels::new(&kernel, x.as_ref(), landmarks.as_ref()).unwrap();
    let rows_seen = || {
        let mut rows = 0;
        panels
            .for_each_block(
                256,
                |_| {},
                |block| {
                    rows += block.iter().map(|p| p.kernel.ncols()).sum::<usize>();
                    Ok::<(), ()>(())
                },
            )
            .unwrap();
        rows
    };
    assert_eq!(rows_seen(), 4000, "no request: every row");
    interrupt::request();
    assert_eq!(rows_seen(), 0, "a request stops the pass before its next block");
    interrupt::clear();
    assert_eq!(rows_seen(), 4000, "cleared: every row again");
}
