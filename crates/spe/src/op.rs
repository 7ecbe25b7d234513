//! Operation Type packet: the class in the header and the subclass byte.
//!
//! Provenance: Arm ARM (DDI 0487), SPE "Operation Type packet" payload encodings:
//! - class 0 (other): `0b0000_0ASC`-style plain operations (bit 0 conditional, bit 1 floating point,
//!   bit 2 Advanced SIMD), SVE operations `(v & 0b1000_1001) == 0b0000_1000` (EVL in bits \[6:4\],
//!   predicated bit 2, FP bit 1), SME operations `(v & 0b1000_1001) == 0b1000_1000` (tile size in
//!   bits \[6:4\]:\[2\]).
//! - class 1 (load/store/atomic): bit 0 store; subclass in bits \[7:1\]: GP register `0x00`,
//!   SIMD&FP `0x04`, unspecified register `0x10`, MTE allocation tag `0x14`, memory copy `0x20`,
//!   memory set `0x25` (whole byte), NV2 system register `0x30`; extended (atomic/exclusive/
//!   acquire-release) `(v & 0b1110_0010) == 0b10` with AR bit 4, EXCL bit 3, AT bit 2; SVE/SME
//!   register `(v & 0b1010) == 0b1000` with gather/scatter bit 7, EVL bits \[6:4\], predicated bit 2;
//!   GCS `(v & 0b1111_1010) == 0x40` with common bit 2.
//! - class 2 (branch/exception return): bit 0 conditional, bit 1 indirect, bit 2 GCS,
//!   bits \[4:3\] call/return (1 call with link, 2 return, 3 other).

use core::fmt;

/// The raw contents of an Operation Type packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct OpType {
    /// Header bits \[1:0\]: 0 other, 1 load/store/atomic, 2 branch or exception return, 3 reserved.
    pub class: u8,
    /// The payload byte.
    pub payload: u8,
}

/// Top-level operation class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    Other,
    LoadStore,
    Branch,
    Reserved,
}

/// Call/return hint of a branch (bits \[4:3\]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallReturn {
    None,
    /// Branch with link (a call).
    Call,
    /// Function return.
    Return,
    /// Any other call/return-type branch.
    Other,
}

/// What a load/store/atomic operation accessed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadStoreKind {
    /// General-purpose register load/store (not atomic, acquire/release or exclusive).
    GpReg,
    /// SIMD&FP register load/store.
    SimdFp,
    /// Load/store whose target register class is not specified.
    UnspecifiedReg,
    /// MRS/MSR at EL1 turned into a memory access by FEAT_NV2.
    NvSysReg,
    /// Load/store of MTE allocation tags.
    MteTag,
    /// Part of a memory copy (FEAT_MOPS CPY*).
    MemCopy,
    /// Part of a memory set (FEAT_MOPS SET*); always a store.
    MemSet,
    /// Atomic, exclusive and/or acquire-release access.
    Extended {
        atomic: bool,
        exclusive: bool,
        acquire_release: bool,
    },
    /// SVE or SME register load/store.
    SveSme {
        evl_bits: u16,
        predicated: bool,
        gather_scatter: bool,
    },
    /// Guarded Control Stack access.
    Gcs { common: bool },
    /// A subclass byte this decoder does not know; kept raw.
    Unknown(u8),
}

/// A decoded operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Neither a memory access nor a branch.
    Other {
        conditional: bool,
        floating_point: bool,
        simd: bool,
    },
    /// An SVE data-processing operation.
    SveOther {
        evl_bits: u16,
        predicated: bool,
        floating_point: bool,
    },
    /// An SME data-processing operation.
    SmeOther {
        tile_bits: u32,
        floating_point: bool,
    },
    /// An "other" subclass this decoder does not know.
    OtherUnknown(u8),
    LoadStore {
        store: bool,
        kind: LoadStoreKind,
    },
    Branch {
        conditional: bool,
        indirect: bool,
        gcs: bool,
        call_return: CallReturn,
    },
    /// Class 3 is reserved by the architecture.
    Reserved {
        payload: u8,
    },
}

/// SVE effective vector length in bits: 32 << bits\[6:4\].
#[inline]
fn evl_bits(v: u8) -> u16 {
    32u16 << ((v >> 4) & 0b111)
}

impl OpType {
    pub const fn new(class: u8, payload: u8) -> Self {
        OpType { class, payload }
    }

    pub fn class(self) -> OpClass {
        match self.class & 0b11 {
            0 => OpClass::Other,
            1 => OpClass::LoadStore,
            2 => OpClass::Branch,
            _ => OpClass::Reserved,
        }
    }

    /// Decodes the subclass byte.
    pub fn operation(self) -> Operation {
        let v = self.payload;
        let bit = |n: u8| v & (1 << n) != 0;
        match self.class() {
            OpClass::Other => {
                if v & 0xf8 == 0 {
                    Operation::Other {
                        conditional: bit(0),
                        floating_point: bit(1),
                        simd: bit(2),
                    }
                } else if v & 0x89 == 0x08 {
                    Operation::SveOther {
                        evl_bits: evl_bits(v),
                        predicated: bit(2),
                        floating_point: bit(1),
                    }
                } else if v & 0x89 == 0x88 {
                    let n = (((v >> 4) & 0b111) << 1) | ((v >> 2) & 1);
                    Operation::SmeOther {
                        tile_bits: 128u32 << n,
                        floating_point: bit(1),
                    }
                } else {
                    Operation::OtherUnknown(v)
                }
            }
            OpClass::LoadStore => {
                let store = bit(0);
                let kind = if v & 0xe2 == 0x02 {
                    LoadStoreKind::Extended {
                        atomic: bit(2),
                        exclusive: bit(3),
                        acquire_release: bit(4),
                    }
                } else if v & 0x0a == 0x08 {
                    LoadStoreKind::SveSme {
                        evl_bits: evl_bits(v),
                        predicated: bit(2),
                        gather_scatter: bit(7),
                    }
                } else if v & 0xfa == 0x40 {
                    LoadStoreKind::Gcs { common: bit(2) }
                } else if v == 0x25 {
                    LoadStoreKind::MemSet
                } else {
                    match v & 0xfe {
                        0x00 => LoadStoreKind::GpReg,
                        0x04 => LoadStoreKind::SimdFp,
                        0x10 => LoadStoreKind::UnspecifiedReg,
                        0x14 => LoadStoreKind::MteTag,
                        0x20 => LoadStoreKind::MemCopy,
                        0x30 => LoadStoreKind::NvSysReg,
                        _ => LoadStoreKind::Unknown(v),
                    }
                };
                Operation::LoadStore { store, kind }
            }
            OpClass::Branch => Operation::Branch {
                conditional: bit(0),
                indirect: bit(1),
                gcs: bit(2),
                call_return: match (v >> 3) & 0b11 {
                    0 => CallReturn::None,
                    1 => CallReturn::Call,
                    2 => CallReturn::Return,
                    _ => CallReturn::Other,
                },
            },
            OpClass::Reserved => Operation::Reserved { payload: v },
        }
    }

    pub fn is_load(self) -> bool {
        self.class() == OpClass::LoadStore && self.payload & 1 == 0
    }

    pub fn is_store(self) -> bool {
        self.class() == OpClass::LoadStore && self.payload & 1 == 1
    }

    pub fn is_branch(self) -> bool {
        self.class() == OpClass::Branch
    }
}

impl LoadStoreKind {
    /// spe-parser's `subclass` column value (e.g. `GP-REG`); the extended kind has none.
    pub fn subclass_name(self) -> &'static str {
        match self {
            LoadStoreKind::GpReg => "GP-REG",
            LoadStoreKind::SimdFp => "SIMD-FP",
            LoadStoreKind::UnspecifiedReg => "UNSPEC-REG",
            LoadStoreKind::NvSysReg => "NV-SYSREG",
            LoadStoreKind::MteTag => "MTE-TAG",
            LoadStoreKind::MemCopy => "MEMCPY",
            LoadStoreKind::MemSet => "MEMSET",
            LoadStoreKind::Extended { .. } => "",
            LoadStoreKind::SveSme { .. } => "SVE-SME-REG",
            LoadStoreKind::Gcs { .. } => "GCS",
            LoadStoreKind::Unknown(_) => "UNKNOWN",
        }
    }
}

/// Perf-style text: `LD GP-REG`, `ST SIMD-FP`, `LD AT AR`, `B COND`, `B IND`, `OTHER`, ...
impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Operation::Other {
                conditional,
                floating_point,
                simd,
            } => {
                f.write_str("OTHER")?;
                if simd {
                    f.write_str(" ASE")?;
                }
                if floating_point {
                    f.write_str(" FP")?;
                }
                if conditional {
                    f.write_str(" COND")?;
                }
                Ok(())
            }
            Operation::SveOther {
                evl_bits,
                predicated,
                floating_point,
            } => {
                f.write_str("SVE-OTHER")?;
                if floating_point {
                    f.write_str(" FP")?;
                }
                if predicated {
                    f.write_str(" PRED")?;
                }
                write!(f, " EVLEN {evl_bits}")
            }
            Operation::SmeOther {
                tile_bits,
                floating_point,
            } => {
                f.write_str("SME-OTHER")?;
                if floating_point {
                    f.write_str(" FP")?;
                }
                write!(f, " ETS {tile_bits}")
            }
            Operation::OtherUnknown(v) => write!(f, "OTHER UNKNOWN(0x{v:02x})"),
            Operation::LoadStore { store, kind } => {
                f.write_str(if store { "ST" } else { "LD" })?;
                match kind {
                    LoadStoreKind::Extended {
                        atomic,
                        exclusive,
                        acquire_release,
                    } => {
                        if atomic {
                            f.write_str(" AT")?;
                        }
                        if exclusive {
                            f.write_str(" EXCL")?;
                        }
                        if acquire_release {
                            f.write_str(" AR")?;
                        }
                        Ok(())
                    }
                    LoadStoreKind::SveSme {
                        evl_bits,
                        predicated,
                        gather_scatter,
                    } => {
                        f.write_str(" SVE-SME-REG")?;
                        if predicated {
                            f.write_str(" PRED")?;
                        }
                        if gather_scatter {
                            f.write_str(" SG")?;
                        }
                        write!(f, " EVLEN {evl_bits}")
                    }
                    LoadStoreKind::Gcs { common } => {
                        f.write_str(" GCS")?;
                        if common {
                            f.write_str(" COMM")?;
                        }
                        Ok(())
                    }
                    LoadStoreKind::Unknown(v) => write!(f, " UNKNOWN(0x{v:02x})"),
                    other => write!(f, " {}", other.subclass_name()),
                }
            }
            Operation::Branch {
                conditional,
                indirect,
                gcs,
                call_return,
            } => {
                f.write_str("B")?;
                if conditional {
                    f.write_str(" COND")?;
                }
                if indirect {
                    f.write_str(" IND")?;
                }
                if gcs {
                    f.write_str(" GCS")?;
                }
                match call_return {
                    CallReturn::None => Ok(()),
                    CallReturn::Call => f.write_str(" CR-BL"),
                    CallReturn::Return => f.write_str(" CR-RET"),
                    CallReturn::Other => f.write_str(" CR-NON-BL-RET"),
                }
            }
            Operation::Reserved { payload } => write!(f, "RESERVED-CLASS 0x{payload:02x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ldst(v: u8) -> Operation {
        OpType::new(1, v).operation()
    }

    #[test]
    fn load_store_subclasses() {
        // Values hand-derived from the bit layouts in the module docs.
        assert_eq!(
            ldst(0x00),
            Operation::LoadStore {
                store: false,
                kind: LoadStoreKind::GpReg
            }
        );
        assert_eq!(
            ldst(0x01),
            Operation::LoadStore {
                store: true,
                kind: LoadStoreKind::GpReg
            }
        );
        assert_eq!(
            ldst(0x05),
            Operation::LoadStore {
                store: true,
                kind: LoadStoreKind::SimdFp
            }
        );
        assert_eq!(
            ldst(0x25),
            Operation::LoadStore {
                store: true,
                kind: LoadStoreKind::MemSet
            }
        );
        assert_eq!(
            ldst(0x21),
            Operation::LoadStore {
                store: true,
                kind: LoadStoreKind::MemCopy
            }
        );
        assert_eq!(
            ldst(0x31),
            Operation::LoadStore {
                store: true,
                kind: LoadStoreKind::NvSysReg
            }
        );
        assert_eq!(
            ldst(0x14),
            Operation::LoadStore {
                store: false,
                kind: LoadStoreKind::MteTag
            }
        );
        assert_eq!(
            ldst(0x10),
            Operation::LoadStore {
                store: false,
                kind: LoadStoreKind::UnspecifiedReg
            }
        );
        // 0x16 = AR(4) | AT(2) | bit1.
        assert_eq!(
            ldst(0x16),
            Operation::LoadStore {
                store: false,
                kind: LoadStoreKind::Extended {
                    atomic: true,
                    exclusive: false,
                    acquire_release: true
                }
            }
        );
        // 0b1011_1100 = SG, EVL=0b011 (256 bits), bit3, PRED.
        assert_eq!(
            ldst(0xbc),
            Operation::LoadStore {
                store: false,
                kind: LoadStoreKind::SveSme {
                    evl_bits: 256,
                    predicated: true,
                    gather_scatter: true
                }
            }
        );
        assert_eq!(
            ldst(0x45),
            Operation::LoadStore {
                store: true,
                kind: LoadStoreKind::Gcs { common: true }
            }
        );
    }

    #[test]
    fn every_ldst_byte_decodes_to_exactly_one_kind() {
        // The subclass encodings must not overlap: check each byte against every pattern.
        for v in 0..=255u8 {
            let matches = [
                v & 0xe2 == 0x02,
                v & 0x0a == 0x08,
                v & 0xfa == 0x40,
                v == 0x25,
                matches!(v & 0xfe, 0x00 | 0x04 | 0x10 | 0x14 | 0x20 | 0x30),
            ];
            assert!(
                matches.iter().filter(|m| **m).count() <= 1,
                "overlap at 0x{v:02x}"
            );
        }
    }

    #[test]
    fn branch_and_other() {
        assert_eq!(OpType::new(2, 0x01).operation().to_string(), "B COND");
        assert_eq!(OpType::new(2, 0x02).operation().to_string(), "B IND");
        assert_eq!(OpType::new(2, 0x08).operation().to_string(), "B CR-BL");
        assert_eq!(OpType::new(2, 0x12).operation().to_string(), "B IND CR-RET");
        assert_eq!(OpType::new(0, 0x00).operation().to_string(), "OTHER");
        // SVE other: bit3 set, EVL 0b010 = 128 bits, predicated, FP.
        assert_eq!(
            OpType::new(0, 0x2e).operation().to_string(),
            "SVE-OTHER FP PRED EVLEN 128"
        );
    }
}
