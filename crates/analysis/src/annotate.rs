//! Precise annotation of one function ([SPE methodology §3.4.2]): its disassembly with, per instruction,
//! the share of the function's samples, load latency and data sources, branch mispredictions,
//! and the source line each instruction comes from.
//!
//! SPE's PCs are the sampled instructions themselves (no skid), so the counts per instruction
//! are exact attributions, unlike perf annotate over PMU-interrupt samples ([SPE methodology §3.3.1]).
//! The code is read from the recorded binary ([`crate::disasm`]); source lines come from its
//! DWARF line tables through the batched symbolizer, one request for all instructions.

use crate::agg::Agg;
use crate::disasm::{disassemble, ElfCode, InsnKind};
use crate::maps::Mapping;
use crate::model::GroupStats;
use crate::profile::group_stats;
use crate::symbolize::CodeSymbolizer;
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Schema identifier of `spelunk annotate --json`.
pub const ANNOTATE_SCHEMA: &str = "spelunk-annotate/1";

/// One instruction of the annotated function.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AnnotatedInstruction {
    /// ELF virtual address (as objdump prints it).
    pub address: u64,
    /// Offset from the function's start.
    pub offset: u64,
    pub bytes: Vec<u8>,
    pub text: String,
    pub branch: bool,
    /// Direct branches: the target address, and `function+offset` when inside the function.
    pub branch_target: Option<u64>,
    pub target_label: Option<String>,
    /// Bytes a load/store moves, when the encoding says.
    pub access_bytes: Option<u32>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Counts at this instruction; `share` is of the function's samples (perf annotate's
    /// "percent: local period").
    #[serde(flatten)]
    pub stats: GroupStats,
}

/// The annotated function.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AnnotateReport {
    pub schema: &'static str,
    pub file: String,
    pub function: String,
    pub dso: String,
    pub arch: String,
    /// ELF virtual address and size of the function.
    pub start: u64,
    pub size: u64,
    /// Selected samples in the function / in the recording.
    pub samples: u64,
    pub selected: u64,
    /// samples / selected.
    pub share_of_selected: f64,
    pub filter: Vec<String>,
    /// Function totals (share = share_of_selected).
    pub totals: GroupStats,
    pub instructions: Vec<AnnotatedInstruction>,
    /// The pieces GCC split off the function (`f.cold`, `f.part.0`: [`crate::names`]), each
    /// annotated like the function; `samples`, `totals` and every `share` count the function
    /// with its parts.
    pub parts: Vec<AnnotatedPart>,
    /// Samples at addresses of the function that are not instruction starts (should be 0).
    pub unplaced_samples: u64,
    /// Source files with their lines, for interleaving (path → text lines), when readable here.
    #[serde(skip)]
    pub sources: HashMap<String, Arc<Vec<String>>>,
    pub notes: Vec<String>,
    /// What the recording lost (as `spelunk report` lists it; set by the caller).
    pub losses: crate::model::Losses,
}

/// A piece of the annotated function emitted as a symbol of its own (`f(int) [clone .cold]`).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AnnotatedPart {
    pub function: String,
    /// ELF virtual address and size of the piece.
    pub start: u64,
    pub size: u64,
    /// Selected samples in the piece.
    pub samples: u64,
    pub instructions: Vec<AnnotatedInstruction>,
}

/// A piece of the function to annotate: its symbol's name as symbolized, the file offset of
/// its first byte and its samples per offset from there.
pub struct PieceInput {
    pub function: String,
    pub start_file_offset: u64,
    pub per_offset: HashMap<u64, Agg>,
}

/// What to annotate: a function of a file, and the samples in it keyed by ELF virtual address.
pub struct AnnotateInput<'a> {
    pub file: String,
    /// The function's name as symbolized (demangled).
    pub function: &'a str,
    /// The recorded path of the binary, and where it is here.
    pub dso: Arc<str>,
    pub local_path: &'a Path,
    /// File offset of the function's first byte (from symbolizing a sampled PC).
    pub start_file_offset: u64,
    /// Samples per offset from the function's start.
    pub per_offset: HashMap<u64, Agg>,
    pub selected: u64,
    pub filter: Vec<String>,
    /// The pieces GCC split off the function, with their samples.
    pub parts: Vec<PieceInput>,
}

/// Disassembles the function (and its parts) and places the samples and source lines.
pub fn annotate(
    input: AnnotateInput<'_>,
    symbolizer: &mut CodeSymbolizer,
) -> Result<AnnotateReport, String> {
    let elf = ElfCode::open(input.local_path)?;
    let name = input.function;
    let mut totals = Agg::default();
    for a in input
        .per_offset
        .values()
        .chain(input.parts.iter().flat_map(|p| p.per_offset.values()))
    {
        totals.merge(a);
    }
    let samples = totals.samples;
    let mut sources: HashMap<String, Arc<Vec<String>>> = HashMap::new();
    let main = Piece {
        function: name,
        start_file_offset: input.start_file_offset,
        per_offset: &input.per_offset,
    };
    let body = annotate_piece(
        &elf,
        &input,
        &main,
        (samples, totals.cost_sampled_cycles()),
        &mut sources,
        symbolizer,
    )?;
    let mut placed = body.placed;
    let mut parts = Vec::with_capacity(input.parts.len());
    for p in &input.parts {
        let piece = Piece {
            function: &p.function,
            start_file_offset: p.start_file_offset,
            per_offset: &p.per_offset,
        };
        let a = annotate_piece(
            &elf,
            &input,
            &piece,
            (samples, totals.cost_sampled_cycles()),
            &mut sources,
            symbolizer,
        )?;
        placed += a.placed;
        parts.push(AnnotatedPart {
            function: p.function.clone(),
            start: a.start,
            size: a.size,
            samples: p.per_offset.values().map(|x| x.samples).sum(),
            instructions: a.instructions,
        });
    }
    let mut notes = Vec::new();
    let unplaced = samples - placed.min(samples);
    if unplaced > 0 {
        notes.push(format!(
            "{unplaced} samples are at addresses that do not start an instruction of the disassembly"
        ));
    }
    let mut t = group_stats(&totals, input.selected, totals.cost_sampled_cycles());
    t.share = if input.selected == 0 {
        0.0
    } else {
        samples as f64 / input.selected as f64
    };
    Ok(AnnotateReport {
        schema: ANNOTATE_SCHEMA,
        file: input.file,
        function: name.to_string(),
        dso: input.dso.to_string(),
        arch: elf.arch.name().to_string(),
        start: body.start,
        size: body.size,
        samples,
        selected: input.selected,
        share_of_selected: t.share,
        filter: input.filter,
        totals: t,
        instructions: body.instructions,
        parts,
        unplaced_samples: unplaced,
        sources,
        notes,
        losses: Default::default(),
    })
}

struct Piece<'a> {
    function: &'a str,
    start_file_offset: u64,
    per_offset: &'a HashMap<u64, Agg>,
}

struct AnnotatedPiece {
    start: u64,
    size: u64,
    instructions: Vec<AnnotatedInstruction>,
    /// Samples at instruction starts.
    placed: u64,
}

/// One piece's instructions, with shares of the function's `samples`.
fn annotate_piece(
    elf: &ElfCode,
    input: &AnnotateInput<'_>,
    piece: &Piece<'_>,
    (samples, total_cost): (u64, f64),
    sources: &mut HashMap<String, Arc<Vec<String>>>,
    symbolizer: &mut CodeSymbolizer,
) -> Result<AnnotatedPiece, String> {
    let name = piece.function;
    let shown = input.local_path.display();
    // The symbol's address and size, from the symbol at the piece's first byte (found by
    // address, not by name: the name symbolized is demangled, the symbol table's is not).
    let (start, size) = symbolizer
        .function_extent(input.local_path, piece.start_file_offset)?
        .ok_or_else(|| {
            format!(
                "{shown}: no symbol '{name}' with a size at file offset {:#x}",
                piece.start_file_offset
            )
        })?;
    let code = elf.read(start, size)?;
    let insns = disassemble(elf.arch, &code, start);

    // Source lines of every instruction, in one batch, through a mapping of the piece.
    let mapping = Arc::new(Mapping::new(
        start,
        size,
        piece.start_file_offset,
        &input.dso,
        true,
        0,
    ));
    let requests: Vec<(Arc<Mapping>, u64)> =
        insns.iter().map(|i| (mapping.clone(), i.address)).collect();
    let locations = symbolizer.symbolize(&requests);

    let mut placed = 0u64;
    let mut instructions = Vec::with_capacity(insns.len());
    for (insn, loc) in insns.iter().zip(&locations) {
        let agg = piece
            .per_offset
            .get(&(insn.address - start))
            .cloned()
            .unwrap_or_default();
        placed += agg.samples;
        let (branch_target, conditional_or_not) = match insn.kind {
            InsnKind::Branch { target, .. } => (target, true),
            _ => (None, false),
        };
        let target_label = branch_target
            .filter(|t| *t >= start && *t < start + size)
            .map(|t| format!("{name}+{:#x}", t - start));
        let file = loc.file.as_ref().map(|f| f.to_string());
        if let Some(f) = &file {
            if !sources.contains_key(f) {
                if let Ok(text) = std::fs::read_to_string(f) {
                    sources.insert(
                        f.clone(),
                        Arc::new(text.lines().map(String::from).collect()),
                    );
                }
            }
        }
        instructions.push(AnnotatedInstruction {
            address: insn.address,
            offset: insn.address - start,
            bytes: insn.bytes.clone(),
            text: insn.text.clone(),
            branch: conditional_or_not,
            branch_target,
            target_label,
            access_bytes: insn.access_bytes,
            file,
            line: loc.line,
            stats: group_stats(&agg, samples, total_cost),
        });
    }
    Ok(AnnotatedPiece {
        start,
        size,
        instructions,
        placed,
    })
}
