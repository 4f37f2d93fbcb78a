//! The repository's citations resolve inside the repository: no doc comment, docstring or doc
//! names a paper by the hashed file name of a copy outside the repository or cites the notes
//! outside it; every paper key in escaped brackets (as rustdoc needs them) in Rust sources is
//! listed in `docs/papers.md`;
//! every `docs/derivations.md §n.m` names a section that exists.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root: the parent of this crate's manifest folder, checked by its
/// `Cargo.toml` declaring the workspace.
fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent folder").to_path_buf();
    let manifest = fs::read_to_string(root.join("Cargo.toml")).expect("the workspace Cargo.toml");
    assert!(manifest.contains("[workspace]"), "{} is not the workspace root", root.display());
    root
}

/// Every file under `dir`, skipping build output and version-control folders.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(name.as_ref(), "target" | ".git" | "__pycache__" | ".venv" | "node_modules") {
                files_under(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

/// The text files the check covers: `crates/`, `docs/`, `xtask/`, `benches/` and `README.md`.
/// Files that are not UTF-8 (arrays, archives) are skipped.
fn repository_texts(root: &Path) -> Vec<(PathBuf, String)> {
    let mut files = vec![root.join("README.md")];
    for dir in ["crates", "docs", "xtask", "benches"] {
        files_under(&root.join(dir), &mut files);
    }
    files.sort();
    files.into_iter().filter_map(|p| fs::read_to_string(&p).ok().map(|text| (p, text))).collect()
}

/// Byte offsets in `line` of a hashed paper file name: three digits, `_`, sixteen lowercase hex
/// digits (the pattern `\d{3}_[0-9a-f]{16}`).
fn hashed_names(line: &str) -> Vec<usize> {
    let b = line.as_bytes();
    let mut found = Vec::new();
    for start in 0..b.len() {
        if b.len() - start < 20 {
            break;
        }
        let digits = b[start..start + 3].iter().all(u8::is_ascii_digit);
        let hex = b[start + 4..start + 20].iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c));
        if digits && b[start + 3] == b'_' && hex {
            found.push(start);
        }
    }
    found
}

/// The name of the implementation notes that lived outside the repository, built so that this
/// file does not contain it.
fn notes_name() -> String {
    ["math", "md"].join(".")
}

/// `file:line: text` for every line of `texts` that cites a hashed paper file or the notes.
fn outside_citations(root: &Path, texts: &[(PathBuf, String)]) -> Vec<String> {
    let notes = notes_name();
    let mut bad = Vec::new();
    for (path, text) in texts {
        for (i, line) in text.lines().enumerate() {
            if !hashed_names(line).is_empty() || line.contains(&notes) {
                let rel = path.strip_prefix(root).unwrap_or(path);
                bad.push(format!("{}:{}: {}", rel.display(), i + 1, line.trim()));
            }
        }
    }
    bad
}

/// The paper keys in escaped brackets (as rustdoc needs them) in `text`.
fn escaped_keys(text: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("\\[") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find("\\]") {
            let key = &rest[..end];
            if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                keys.insert(key.to_string());
            }
        }
    }
    keys
}

/// The section numbers `n` and `n.m` of the `## n.` and `### n.m` headings of `derivations`.
fn derivation_sections(derivations: &str) -> BTreeSet<String> {
    derivations
        .lines()
        .filter(|l| l.starts_with("## ") || l.starts_with("### "))
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|n| n.trim_end_matches('.').to_string())
        .filter(|n| n.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .collect()
}

/// The `§n` / `§n.m` numbers cited after `derivations.md` on each line of `text` (and on the
/// next line when the citation breaks right after the file name).
fn cited_sections(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut cited = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find("derivations.md") else { continue };
        let mut tail = line[at..].to_string();
        if !tail.contains('§') {
            tail = lines.get(i + 1).copied().unwrap_or("").to_string();
        }
        for piece in tail.split('§').skip(1) {
            let number: String = piece.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            let number = number.trim_end_matches('.');
            if !number.is_empty() {
                cited.push((i + 1, number.to_string()));
            }
        }
    }
    cited
}

#[test]
fn no_citation_points_outside_the_repository() {
    let root = repo_root();
    let texts = repository_texts(&root);
    assert!(texts.iter().any(|(p, _)| p.ends_with("docs/papers.md")), "docs/papers.md is missing");
    let bad = outside_citations(&root, &texts);
    assert!(
        bad.is_empty(),
        "cite the papers by key (docs/papers.md) and the derivations as docs/derivations.md §n, not files \
         outside the repository:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_paper_key_and_derivation_section_exists() {
    let root = repo_root();
    let texts = repository_texts(&root);
    let papers = fs::read_to_string(root.join("docs/papers.md")).expect("docs/papers.md");
    let sections = derivation_sections(&fs::read_to_string(root.join("docs/derivations.md")).expect("derivations"));
    let mut bad = Vec::new();
    for (path, text) in &texts {
        let rel = path.strip_prefix(&root).unwrap_or(path);
        if path.extension().is_some_and(|e| e == "rs") {
            for key in escaped_keys(text) {
                if !papers.contains(&format!("| \\[{key}\\] |")) {
                    bad.push(format!("{}: key [{key}] is not listed in docs/papers.md", rel.display()));
                }
            }
        }
        for (line, number) in cited_sections(text) {
            if !sections.contains(&number) {
                bad.push(format!("{}:{line}: docs/derivations.md has no §{number}", rel.display()));
            }
        }
    }
    assert!(bad.is_empty(), "unresolved references:\n{}", bad.join("\n"));
}

/// The checks above find what they look for (they would pass vacuously otherwise).
#[test]
fn the_scanners_find_planted_citations() {
    let planted = format!("/// Paper `{}_{}.txt`, Algorithm 1.", "004", "cadb4dc86f44be57");
    assert_eq!(hashed_names(&planted), vec![11]);
    assert!(hashed_names("/// \\[SLKL\\], Algorithm 1; 004_cadb4dc86f44be5 (15 hex digits).").is_empty());
    assert!(hashed_names("").is_empty());

    let root = Path::new("/repo");
    let texts = vec![
        (root.join("a.rs"), format!("fine\n{planted}\n")),
        (root.join("b.md"), format!("see spec/{} §2.4\n", notes_name())),
        (root.join("c.rs"), "/// \\[SKPCA\\], Algorithm 1; docs/derivations.md §2.2.\n".to_string()),
    ];
    let bad = outside_citations(root, &texts);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].starts_with("a.rs:2: "), "{}", bad[0]);
    assert!(bad[1].starts_with("b.md:1: "), "{}", bad[1]);

    assert_eq!(escaped_keys(&texts[2].1).into_iter().collect::<Vec<_>>(), vec!["SKPCA".to_string()]);
    let sections = derivation_sections("# T\n## 2. SKPCA\n### 2.2 The iteration\n### 2.4 Recovery\n");
    assert_eq!(sections.into_iter().collect::<Vec<_>>(), vec!["2", "2.2", "2.4"]);
    assert_eq!(
        cited_sections("x docs/derivations.md §2.2–§2.4 and §6.9, Case 4.\nderivations.md\n/// §1.7 (second)"),
        vec![(1, "2.2".to_string()), (1, "2.4".to_string()), (1, "6.9".to_string()), (2, "1.7".to_string())]
    );
}
