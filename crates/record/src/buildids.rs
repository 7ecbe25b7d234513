//! The build-ids of the files a recording mapped, read when the recording ends (the files are
//! then the ones that ran), for the perf.data's HEADER_BUILD_ID: a report can then tell a
//! rebuilt file from the recorded one instead of naming samples from the wrong file.

use spelunk_perf::buildid::read_build_id;
use spelunk_perf::{BuildIdEntry, SpeRecordingWriter};
use std::path::Path;

/// Reads the build-id of every file `w` wrote a mapping of and hands them to the writer. Files
/// without a build-id (not ELF, or linked without `--build-id`) are left out; files whose
/// build-id note is damaged or that cannot be read are left out with a warning.
pub fn attach(w: &mut SpeRecordingWriter, warnings: &mut Vec<String>) {
    let mut entries = Vec::new();
    for (path, cpu_mode) in w.mapped_files() {
        match read_build_id(Path::new(path)) {
            Ok(Some(build_id)) => entries.push(BuildIdEntry {
                cpu_mode,
                // The host (what perf writes; perf's readers take other pids for guests).
                pid: -1,
                build_id,
                path: path.to_string(),
            }),
            Ok(None) => {}
            // Deleted since (a temporary file) or unreadable: nothing to check it against.
            Err(_) if !Path::new(path).is_file() => {}
            Err(e) => warnings.push(format!(
                "{path}: no build-id recorded ({e}); a report cannot tell it from a rebuilt file"
            )),
        }
    }
    w.set_build_ids(entries);
}
