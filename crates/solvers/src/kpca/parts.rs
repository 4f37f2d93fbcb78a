//! Kernel PCA models in parts: under `mpirun -np P`, the exact solvers, SKPCA and KHA keep the
//! model rows where they were read. Each rank's part holds its training rows, its rows of the
//! coefficients `A` and of the kernel column means `m`; the eigenvalues, kernel,
//! standardization and grand mean are the same on every rank. A projection is a sum over the
//! parts (docs/distributed.md, "Models in parts"):
//! $$z(x) = \sum_p k(x, R_p) A_p - \Big(\tfrac1n \sum_p k(x, R_p) 1\Big) \sum_p 1^\top A_p -
//!   \sum_p \big(m_p^\top A_p - \bar m\, 1^\top A_p\big),$$
//! which is [`KernelPcaModel::transform`]'s formula with the rows split, so nothing of size
//! `n` is ever held by one process.
//!
//! **Files.** `model.npz` is the manifest (kind [`KERNEL_PCA_PARTS_KIND`]: the header without
//! rows, the number of parts, their rows and file names, and a fit token) and part `i` of `P`
//! is `model.part-i-of-P.npz`, an ordinary `kernel-pca` model file of its rows with a `part`
//! entry (index, count, the total `n` and the token). Rank 0 writes the manifest after every
//! part is on disk. [`crate::Persist::load`] of the manifest joins the parts into the whole
//! model (one process); [`load_kernel_pca_for_rank`] gives each rank of another run its share
//! of the parts, for [`KernelPcaModel::transform_sharded`].

use std::path::{Path, PathBuf};

use faer::{Mat, MatRef};
use serde_json::{Value, json};
use stolr_comm::Communicator;
use stolr_estimators::{DataRef, Kernel};
use stolr_memory::{MemoryBudget, f64_bytes};
use stolr_model::ModelFile;

use crate::model_io::bad;
use crate::{KernelPcaModel, Persist, SolverError};

/// The kind of the manifest of a kernel PCA model in parts.
pub const KERNEL_PCA_PARTS_KIND: &str = "kernel-pca-parts";

/// Rows of new data sent to every rank at a time by [`KernelPcaModel::transform_sharded`] and
/// the sharded kernel means: each rank then forms a `ROW_BLOCK × p` kernel block.
const ROW_BLOCK: usize = 1024;

/// Which part of a model in parts a [`KernelPcaModel`] is: part `index` of `count`, whose rows
/// are some of the `total_rows` training rows of the fit `fit` (a token the manifest and every
/// part of one fit share, so that parts of two fits are never mixed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPart {
    /// The part's number, `0 ≤ index < count` (the rank that wrote it).
    pub index: usize,
    /// The number of parts `P`.
    pub count: usize,
    /// The training rows `n` of the whole model.
    pub total_rows: usize,
    /// The fit's token (8 hexadecimal digits).
    pub fit: String,
}

impl ModelPart {
    /// The `part` entry of a model file.
    pub(crate) fn to_json(&self) -> Value {
        json!({"index": self.index, "count": self.count, "total_rows": self.total_rows, "fit": self.fit})
    }

    /// The `part` entry of a model file's parameters, `None` without one.
    pub(crate) fn from_parameters(parameters: &Value, path: &Path) -> Result<Option<Self>, SolverError> {
        let Some(v) = parameters.get("part").filter(|v| !v.is_null()) else { return Ok(None) };
        let number = |name: &str| whole_number(v, name, "the part", path);
        let fit = v.get("fit").and_then(Value::as_str).ok_or_else(|| bad(path, "the part has no 'fit' token"))?;
        let part = Self {
            index: number("index")?,
            count: number("count")?,
            total_rows: number("total_rows")?,
            fit: fit.into(),
        };
        if part.count == 0 || part.index >= part.count {
            return Err(bad(path, format!("part {} of {} does not exist", part.index, part.count)));
        }
        Ok(Some(part))
    }

    /// Checks that a part holds at most the whole model's rows.
    pub(crate) fn check_rows(&self, rows: usize, path: &Path) -> Result<(), SolverError> {
        if rows > self.total_rows {
            return Err(bad(path, format!("a part of {rows} rows of a model of {} rows", self.total_rows)));
        }
        Ok(())
    }

    /// The error of a part asked to transform rows alone.
    pub(crate) fn refusal(&self) -> SolverError {
        SolverError::ModelMismatch {
            reason: format!(
                "this is part {} of {} of a kernel PCA model in parts (n = {}): load its manifest (model.npz), \
                 which joins the parts, or transform under mpirun with every part (stolr transform)",
                self.index, self.count, self.total_rows
            ),
        }
    }
}

/// The whole number `name` of the JSON object `v` (`what`'s, in the error of the file `path`).
fn whole_number(v: &Value, name: &str, what: &str, path: &Path) -> Result<usize, SolverError> {
    v.get(name)
        .and_then(Value::as_u64)
        .and_then(|x| usize::try_from(x).ok())
        .ok_or_else(|| bad(path, format!("{what} has no whole number '{name}'")))
}

/// The file of part `index` of `count` beside the manifest `path`: `DIR/model.npz` gives
/// `DIR/model.part-1-of-3.npz`.
pub fn kernel_pca_part_path(path: &Path, index: usize, count: usize) -> PathBuf {
    let stem = path.file_stem().map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned());
    let extension = path.extension().map_or_else(|| "npz".into(), |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}.part-{index}-of-{count}.{extension}"))
}

/// The token of a fit: CRC-32 of its header (solver, kernel, eigenvalues, grand mean, `n`,
/// `d`, `P`), rank 0's broadcast to every rank. Collective.
fn fit_token(header: &KernelPcaModel, total_rows: usize, comm: &dyn Communicator) -> String {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(header.solver().as_bytes());
    hasher.update(crate::model_io::kernel_to_json(header.kernel()).to_string().as_bytes());
    for v in header.eigenvalues() {
        hasher.update(&v.to_le_bytes());
    }
    if let crate::KernelCentering::Training { grand_mean, .. } = header.centering() {
        hasher.update(&grand_mean.to_le_bytes());
    }
    for v in [total_rows, header.n_features(), comm.size()] {
        hasher.update(&(v as u64).to_le_bytes());
    }
    let mut token = [f64::from(hasher.finalize())];
    comm.broadcast(&mut token, 0);
    format!("{:08x}", token[0] as u32)
}

impl KernelPcaModel {
    /// This rank's part of a model in parts: `self` holds this rank's training rows, their
    /// coefficients and column means, and is marked as part `comm.rank()` of `comm.size()` of
    /// a model of `total_rows` rows, with the fit's token. Collective (the token is rank 0's).
    ///
    /// # Errors
    /// As [`KernelPcaModel::with_part`].
    pub(crate) fn into_rank_part(self, total_rows: usize, comm: &dyn Communicator) -> Result<Self, SolverError> {
        let fit = fit_token(&self, total_rows, comm);
        let part = ModelPart { index: comm.rank(), count: comm.size(), total_rows, fit };
        self.with_part(Some(part))
    }

    /// Writes a model in parts (collective): each rank writes its part to
    /// [`kernel_pca_part_path`] (atomically); once every part is on disk, rank 0 writes the
    /// manifest at `path`. Returns the file names written (the manifest's, then the parts'
    /// in order), the same on every rank. A whole model (not a part) is written by rank 0
    /// alone, as one process writes it.
    ///
    /// # Errors
    /// [`SolverError::Model`] for a file that cannot be written (on the rank that failed);
    /// [`SolverError::ModelMismatch`] on the others, naming it.
    pub fn save_in_parts(&self, path: &Path, comm: &dyn Communicator) -> Result<Vec<String>, SolverError> {
        let name = |p: &Path| p.file_name().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let Some(part) = self.part() else {
            let saved = if comm.is_root() { self.save(path) } else { Ok(()) };
            collective(comm, saved, "write the model")?;
            return Ok(vec![name(path)]);
        };
        let own = kernel_pca_part_path(path, part.index, part.count);
        collective(comm, self.save(&own), "write its part of the model")?;
        let rows: Vec<usize> = comm.all_gather(&[self.rows().nrows() as f64]).iter().map(|r| r[0] as usize).collect();
        let files: Vec<String> = (0..part.count).map(|i| name(&kernel_pca_part_path(path, i, part.count))).collect();
        let manifest = comm.is_root().then(|| {
            let mut file = self.without_rows().model_file_of_kind(KERNEL_PCA_PARTS_KIND);
            file.parameters_mut()["parts"] = json!({
                "count": part.count,
                "total_rows": part.total_rows,
                "fit": part.fit,
                "rows": rows,
                "files": files,
            });
            file.save(path).map_err(SolverError::from)
        });
        collective(comm, manifest.unwrap_or(Ok(())), "write the manifest of the model")?;
        Ok(std::iter::once(name(path)).chain(files).collect())
    }

    /// [`crate::Transformer::transform`] of this rank's new rows `x` `(m_p, d)` by a model
    /// held in parts across the ranks of `comm` (each rank's `self` its share, from
    /// [`load_kernel_pca_for_rank`] or a fit): the rows travel to every rank in blocks of 1024,
    /// each rank adds its part's $k(x, R_p) A_p$ and $k(x, R_p)1$, the sums (in rank order)
    /// return to the rows' owner, which centres them. Result `(m_p, r)`. A whole model
    /// transforms its rows on each rank. Collective; memory `O(1024·(p + d))` per rank besides
    /// the part.
    ///
    /// # Errors
    /// On every rank: [`SolverError::ModelMismatch`] if the parts do not add up to the model's
    /// rows or are not one per rank; the errors of [`KernelPcaModel::transform_data`] for one
    /// rank's rows (that rank's error; the others name it).
    pub fn transform_sharded(&self, x: DataRef<'_>, comm: &dyn Communicator) -> Result<Mat<f64>, SolverError> {
        let Some(part) = self.part() else {
            return collective(comm, self.transform_data(x), "transform its rows");
        };
        // Every rank learns whether the parts cover the model, one per rank, before any block.
        let placed = part.count == comm.size() && part.index == comm.rank();
        let mut counts = [self.rows().nrows() as f64, f64::from(u8::from(!placed))];
        comm.all_reduce_sum(&mut counts);
        if counts[0] as usize != part.total_rows || counts[1] > 0.0 {
            return Err(SolverError::ModelMismatch {
                reason: format!(
                    "the parts on the {} ranks hold {} of the model's {} rows, {} of them not as the part of \
                     their rank (this rank: part {} of {})",
                    comm.size(),
                    counts[0],
                    part.total_rows,
                    counts[1],
                    part.index,
                    part.count
                ),
            });
        }
        let mut storage = None;
        let prepared = crate::model_io::prepare_data(x, self.n_features(), self.standardization(), &mut storage);
        let x = collective(comm, prepared, "transform its rows")?.to_dense();
        let r = self.rank();
        // Σ_p 1ᵀA_p and Σ_p (m_pᵀA_p − m̄ 1ᵀA_p), in rank order.
        let (sums, shift) = self.centring_terms();
        let mut terms = [sums, shift].concat();
        comm.all_reduce_sum(&mut terms);
        let (sums, shift) = terms.split_at(r);
        let products = circulate_rows(comm, x.as_ref(), r + 1, &mut |block| {
            let (b, row_sums) = self.block_products(DataRef::Dense(block));
            Mat::from_fn(block.nrows(), r + 1, |i, j| if j < r { b[(i, j)] } else { row_sums[i] })
        });
        let mut z = Mat::<f64>::zeros(x.nrows(), r);
        let row_sums: Vec<f64> = products.col(r).iter().copied().collect();
        self.finish_block(&mut z, 0, products.as_ref().subcols(0, r), &row_sums, part.total_rows, (sums, shift));
        Ok(z)
    }
}

/// One rank's failure to do `what` made an error on every rank
/// ([`crate::error::on_every_rank`]; the others' error names the rank). Collective.
fn collective<T>(comm: &dyn Communicator, own: Result<T, SolverError>, what: &str) -> Result<T, SolverError> {
    crate::error::on_every_rank(comm, own, |rank| SolverError::ModelMismatch {
        reason: format!("rank {rank} of {} could not {what} (see its error)", comm.size()),
    })
}

/// For this rank's rows `local` `(m_p, d)`, the sum over the ranks of `f(block)` `(b, c)`:
/// each rank's rows are broadcast to every rank in blocks of [`ROW_BLOCK`], every rank
/// applies `f` to the block, and the sums (in rank order) return to the rows' owner. Returns
/// `(m_p, c)`. Collective; `f` must give `c` columns on every rank.
pub(crate) fn circulate_rows(
    comm: &dyn Communicator,
    local: MatRef<'_, f64>,
    c: usize,
    f: &mut dyn FnMut(MatRef<'_, f64>) -> Mat<f64>,
) -> Mat<f64> {
    let d = local.ncols();
    let counts: Vec<usize> = comm.all_gather(&[local.nrows() as f64]).iter().map(|v| v[0] as usize).collect();
    let mut out = Mat::<f64>::zeros(local.nrows(), c);
    for (owner, &rows) in counts.iter().enumerate() {
        for start in (0..rows).step_by(ROW_BLOCK) {
            let b = ROW_BLOCK.min(rows - start);
            let mut buffer = vec![0.0; b * d];
            if owner == comm.rank() {
                for i in 0..b {
                    for j in 0..d {
                        buffer[i * d + j] = local[(start + i, j)];
                    }
                }
            }
            comm.broadcast(&mut buffer, owner);
            let block = Mat::from_fn(b, d, |i, j| buffer[i * d + j]);
            let part = f(block.as_ref());
            let mut sums: Vec<f64> = (0..b * c).map(|k| part[(k / c, k % c)]).collect();
            comm.all_reduce_sum(&mut sums);
            if owner == comm.rank() {
                for i in 0..b {
                    for j in 0..c {
                        out[(start + i, j)] = sums[i * c + j];
                    }
                }
            }
        }
    }
    out
}

/// The entries of $m = K1/n$ for this rank's rows `local` `(n_p, d)` (dense) of the `n`
/// training rows held across the ranks of `comm`, and $\bar m = 1^\top K 1/n^2$: every rank's
/// rows meet every other's in blocks ([`circulate_rows`]), so no rank holds more than its rows
/// and a block. Time $O(n_p\, n\, d)$ per rank. Collective.
pub(crate) fn kernel_row_means_sharded(
    local: MatRef<'_, f64>,
    kernel: &Kernel,
    total_rows: usize,
    comm: &dyn Communicator,
) -> (Vec<f64>, f64) {
    let sums = circulate_rows(comm, local, 1, &mut |block| {
        let k = kernel.cross(DataRef::Dense(block), local);
        Mat::from_fn(block.nrows(), 1, |i, _| k.row(i).sum())
    });
    let means: Vec<f64> = sums.col(0).iter().map(|s| s / total_rows as f64).collect();
    let mut grand = [means.iter().sum::<f64>()];
    comm.all_reduce_sum(&mut grand);
    (means, grand[0] / total_rows as f64)
}

/// The manifest's list of parts: their count, `n`, the token, and each part's rows and file
/// (a bare name in the manifest's folder).
struct Manifest {
    count: usize,
    total_rows: usize,
    fit: String,
    rows: Vec<usize>,
    files: Vec<PathBuf>,
}

impl Manifest {
    fn read(file: &ModelFile, path: &Path) -> Result<Self, SolverError> {
        let v = file.parameters().get("parts").ok_or_else(|| bad(path, "the manifest lists no parts"))?;
        let number = |name: &str| whole_number(v, name, "the manifest", path);
        let (count, total_rows) = (number("count")?, number("total_rows")?);
        let fit = v.get("fit").and_then(Value::as_str).ok_or_else(|| bad(path, "the manifest has no 'fit' token"))?;
        let rows: Vec<usize> = v
            .get("rows")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_u64().and_then(|x| usize::try_from(x).ok())).collect())
            .unwrap_or_default();
        let names: Vec<&str> = v
            .get("files")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if count == 0 || rows.len() != count || names.len() != count {
            return Err(bad(
                path,
                format!("the manifest lists {} row counts and {} files for {count} parts", rows.len(), names.len()),
            ));
        }
        if rows.iter().sum::<usize>() != total_rows {
            return Err(bad(
                path,
                format!("the parts' rows add up to {}, not n = {total_rows}", rows.iter().sum::<usize>()),
            ));
        }
        let mut files = Vec::with_capacity(count);
        for name in names {
            let bare = Path::new(name).file_name().is_some_and(|f| f == std::ffi::OsStr::new(name));
            if !bare || name.starts_with('.') {
                return Err(bad(path, format!("the part file '{name}' is not a file name beside the manifest")));
            }
            files.push(path.with_file_name(name));
        }
        Ok(Self { count, total_rows, fit: fit.into(), rows, files })
    }

    /// Part `index` read within `memory` and checked against the manifest.
    fn part(&self, index: usize, memory: MemoryBudget) -> Result<KernelPcaModel, SolverError> {
        let path = &self.files[index];
        let file = ModelFile::load_kind(path, &[KernelPcaModel::KIND], memory)
            .map_err(|e| bad(path, format!("part {index} of {} of the model: {e}", self.count)))?;
        let model = KernelPcaModel::from_model_file(&file, path)?;
        let expected = ModelPart { index, count: self.count, total_rows: self.total_rows, fit: self.fit.clone() };
        match model.part() {
            Some(part) if *part == expected && model.rows().nrows() == self.rows[index] => Ok(model),
            found => Err(bad(
                path,
                format!(
                    "not part {index} of {} ({} rows) of this fit (token {}): it is {}",
                    self.count,
                    self.rows[index],
                    self.fit,
                    found.map_or_else(
                        || "a whole model".to_string(),
                        |p| format!("part {} of {}, {} rows, token {}", p.index, p.count, model.rows().nrows(), p.fit)
                    )
                ),
            )),
        }
    }

    /// Reads the parts `indices` and joins them under `header` as `part`; checks first that
    /// they and their join fit `memory`.
    fn join(
        &self,
        header: &KernelPcaModel,
        indices: std::ops::Range<usize>,
        part: Option<ModelPart>,
        memory: MemoryBudget,
    ) -> Result<KernelPcaModel, SolverError> {
        let rows: usize = self.rows[indices.clone()].iter().sum();
        let width = header.n_features() + header.rank() + 1;
        memory.check(
            format!(
                "the model's parts {}..{} of {} ({rows} rows, read and joined)",
                indices.start, indices.end, self.count
            ),
            f64_bytes(&[2, rows, width]),
        )?;
        let parts = indices.map(|i| self.part(i, memory)).collect::<Result<Vec<_>, _>>()?;
        KernelPcaModel::join(header, &parts, part)
    }
}

/// The whole model of the manifest `file` (read from `path`): every part read, checked
/// against the manifest (its index, count, rows and fit token) and joined in order.
///
/// # Errors
/// [`SolverError::ModelFile`] for a manifest that lists its parts inconsistently, a missing or
/// damaged part, or a part of another fit; [`SolverError::Memory`] when the parts and their
/// join exceed `memory` (checked before any part is read).
pub fn load_kernel_pca_parts(
    file: &ModelFile,
    path: &Path,
    memory: MemoryBudget,
) -> Result<KernelPcaModel, SolverError> {
    let manifest = Manifest::read(file, path)?;
    let header = KernelPcaModel::from_model_file_of_any_kind(file, path)?;
    manifest.join(&header, 0..manifest.count, None, memory)
}

/// A kernel PCA model for rank `rank` of `size` to transform its rows with
/// ([`KernelPcaModel::transform_sharded`]): a whole model as it is; for a manifest, this
/// rank's share of the parts (parts `rank·P/size` up to `(rank + 1)·P/size`, none when there
/// are more ranks than parts) joined and marked as part `rank` of `size`.
///
/// # Errors
/// As [`crate::Persist::load`] and [`load_kernel_pca_parts`]; [`SolverError::ModelMismatch`]
/// for a part file given instead of its manifest.
pub fn load_kernel_pca_for_rank(
    path: &Path,
    rank: usize,
    size: usize,
    memory: MemoryBudget,
) -> Result<KernelPcaModel, SolverError> {
    let path = stolr_model::resolve_model_path(path)?;
    let file = ModelFile::load_kind(&path, &[KernelPcaModel::KIND, KERNEL_PCA_PARTS_KIND], memory)?;
    if file.kind() == KernelPcaModel::KIND {
        let model = KernelPcaModel::from_model_file(&file, &path)?;
        if let Some(part) = model.part() {
            return Err(part.refusal());
        }
        return Ok(model);
    }
    let manifest = Manifest::read(&file, &path)?;
    let header = KernelPcaModel::from_model_file_of_any_kind(&file, &path)?;
    let share = ModelPart { index: rank, count: size, total_rows: manifest.total_rows, fit: manifest.fit.clone() };
    let (first, last) = (rank * manifest.count / size, (rank + 1) * manifest.count / size);
    manifest.join(&header, first..last, Some(share), memory)
}
