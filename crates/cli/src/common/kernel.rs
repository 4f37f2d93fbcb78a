//! The kernel of a run as `report.json` gives it.

use stolr_estimators::Kernel;
use stolr_report::ReportKernel;
use stolr_solvers::kernel_parameters_json;

/// `kernel` for `report.json`: its name and parameters, and for a kernel with a bandwidth how
/// σ was chosen (`sigma_source`).
pub fn report_kernel(kernel: &Kernel, sigma_source: &str) -> ReportKernel {
    ReportKernel {
        name: kernel.name().into(),
        parameters: kernel_parameters_json(kernel),
        sigma_source: kernel.bandwidth().map(|_| sigma_source.into()),
    }
}
