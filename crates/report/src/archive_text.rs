//! The text `spelunk archive` prints: what went into the archive, what was left out and why,
//! and how to read it elsewhere.

use spelunk_engine::archive::ArchiveSummary;
use std::fmt::Write as _;

/// The summary of a written archive.
pub fn render(s: &ArchiveSummary) -> String {
    let mut o = String::new();
    let files_bytes: u64 = s.files.iter().map(|f| f.size_bytes).sum();
    let _ = writeln!(
        o,
        "wrote {} ({} bytes): {}{}, {} mapped files by build-id ({} bytes)",
        s.output.display(),
        s.size_bytes,
        s.recording,
        s.sidecar
            .as_ref()
            .map_or(String::new(), |c| format!(" and {c}")),
        s.files.len(),
        files_bytes
    );
    for f in &s.files {
        let _ = writeln!(o, "  {} {}", f.build_id, f.recorded_path);
    }
    for (path, why) in &s.left_out {
        let _ = writeln!(
            o,
            "  left out: {path}: {why} (its samples will not be named)"
        );
    }
    let _ = writeln!(
        o,
        "to read it elsewhere: mkdir DIR && tar xf {} -C DIR && spelunk report DIR/{} --symfs DIR",
        s.output.display(),
        s.recording
    );
    o
}
