//! One module per paper reproduced. Each declares its command line (`SPEC`), runs its
//! experiments (`run`), and keeps its runs, its plots and its Markdown summary in separate
//! files.

pub mod msg;
pub mod pca;
pub mod skpca;
pub mod slkl;
