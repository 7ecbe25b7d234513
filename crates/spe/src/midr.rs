//! Main ID Register (MIDR_EL1) values and the CPU models spelunk knows by them.
//!
//! Provenance: Arm ARM (DDI 0487) MIDR_EL1 field layout (Implementer \[31:24\], Variant \[23:20\],
//! Architecture \[19:16\], PartNum \[15:4\], Revision \[3:0\]); part numbers from the cores' Technical
//! Reference Manuals, as also listed in Linux `arch/arm64/include/asm/cputype.h` and in Arm's
//! telemetry `midr-mapping.json` (ARM-software/telemetry-solution, `data/pmu/cpu/neoverse`).

use core::fmt;

/// A MIDR_EL1 value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Midr(pub u64);

impl Midr {
    pub const fn new(implementer: u8, variant: u8, part: u16, revision: u8) -> Self {
        Midr(
            ((implementer as u64) << 24)
                | (((variant & 0xf) as u64) << 20)
                | (0xf << 16)
                | (((part & 0xfff) as u64) << 4)
                | ((revision & 0xf) as u64),
        )
    }
    pub const fn implementer(self) -> u8 {
        (self.0 >> 24) as u8
    }
    pub const fn variant(self) -> u8 {
        ((self.0 >> 20) & 0xf) as u8
    }
    pub const fn part(self) -> u16 {
        ((self.0 >> 4) & 0xfff) as u16
    }
    pub const fn revision(self) -> u8 {
        (self.0 & 0xf) as u8
    }

    /// Parses `0x410fd0c0` (sysfs `midr_el1`), `410fd0c0`, or a decimal value.
    pub fn parse(s: &str) -> Option<Midr> {
        let s = s.trim();
        let v = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            u64::from_str_radix(hex, 16).ok()?
        } else if s.chars().all(|c| c.is_ascii_digit()) {
            s.parse().ok()?
        } else {
            u64::from_str_radix(s, 16).ok()?
        };
        Some(Midr(v))
    }

    /// The CPU model, if spelunk knows this implementer/part pair.
    pub fn model(self) -> Option<CpuModel> {
        CpuModel::ALL.iter().copied().find(|m| {
            let (imp, part) = m.ids();
            imp == self.implementer() && part == self.part()
        })
    }
}

impl fmt::Display for Midr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:08x}", self.0)
    }
}

/// Implementer codes.
pub mod implementer {
    pub const ARM: u8 = 0x41;
    pub const HISILICON: u8 = 0x48;
    pub const NVIDIA: u8 = 0x4e;
    pub const MICROSOFT: u8 = 0x6d;
    pub const AMPERE: u8 = 0xc0;
}

/// CPU models spelunk has SPE facts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuModel {
    NeoverseN1,
    NeoverseN2,
    NeoverseN3,
    NeoverseV1,
    NeoverseV2,
    NeoverseV3,
    NeoverseV3AE,
    NeoverseE1,
    CortexA720,
    CortexA725,
    CortexX1C,
    CortexX3,
    CortexX925,
    /// Microsoft Azure Cobalt 100 (a Neoverse N2 with Microsoft's implementer code).
    AzureCobalt100,
    AmpereOne,
    AmpereOneA,
    HiSiliconHip12,
}

impl CpuModel {
    pub const ALL: [CpuModel; 17] = [
        CpuModel::NeoverseN1,
        CpuModel::NeoverseN2,
        CpuModel::NeoverseN3,
        CpuModel::NeoverseV1,
        CpuModel::NeoverseV2,
        CpuModel::NeoverseV3,
        CpuModel::NeoverseV3AE,
        CpuModel::NeoverseE1,
        CpuModel::CortexA720,
        CpuModel::CortexA725,
        CpuModel::CortexX1C,
        CpuModel::CortexX3,
        CpuModel::CortexX925,
        CpuModel::AzureCobalt100,
        CpuModel::AmpereOne,
        CpuModel::AmpereOneA,
        CpuModel::HiSiliconHip12,
    ];

    /// (implementer, part number)
    pub const fn ids(self) -> (u8, u16) {
        use implementer::*;
        match self {
            CpuModel::NeoverseN1 => (ARM, 0xd0c),
            CpuModel::NeoverseN2 => (ARM, 0xd49),
            CpuModel::NeoverseN3 => (ARM, 0xd8e),
            CpuModel::NeoverseV1 => (ARM, 0xd40),
            CpuModel::NeoverseV2 => (ARM, 0xd4f),
            CpuModel::NeoverseV3 => (ARM, 0xd84),
            CpuModel::NeoverseV3AE => (ARM, 0xd83),
            CpuModel::NeoverseE1 => (ARM, 0xd4a),
            CpuModel::CortexA720 => (ARM, 0xd81),
            CpuModel::CortexA725 => (ARM, 0xd87),
            CpuModel::CortexX1C => (ARM, 0xd4c),
            CpuModel::CortexX3 => (ARM, 0xd4e),
            CpuModel::CortexX925 => (ARM, 0xd85),
            CpuModel::AzureCobalt100 => (MICROSOFT, 0xd49),
            CpuModel::AmpereOne => (AMPERE, 0xac3),
            CpuModel::AmpereOneA => (AMPERE, 0xac4),
            CpuModel::HiSiliconHip12 => (HISILICON, 0xd06),
        }
    }

    /// A representative MIDR (variant 0, revision 0) for recordings spelunk writes itself.
    pub const fn midr(self) -> Midr {
        let (imp, part) = self.ids();
        Midr::new(imp, 0, part, 0)
    }

    /// Human name, also accepted by [`CpuModel::from_name`].
    pub const fn name(self) -> &'static str {
        match self {
            CpuModel::NeoverseN1 => "neoverse-n1",
            CpuModel::NeoverseN2 => "neoverse-n2",
            CpuModel::NeoverseN3 => "neoverse-n3",
            CpuModel::NeoverseV1 => "neoverse-v1",
            CpuModel::NeoverseV2 => "neoverse-v2",
            CpuModel::NeoverseV3 => "neoverse-v3",
            CpuModel::NeoverseV3AE => "neoverse-v3ae",
            CpuModel::NeoverseE1 => "neoverse-e1",
            CpuModel::CortexA720 => "cortex-a720",
            CpuModel::CortexA725 => "cortex-a725",
            CpuModel::CortexX1C => "cortex-x1c",
            CpuModel::CortexX3 => "cortex-x3",
            CpuModel::CortexX925 => "cortex-x925",
            CpuModel::AzureCobalt100 => "azure-cobalt-100",
            CpuModel::AmpereOne => "ampereone",
            CpuModel::AmpereOneA => "ampereone-a",
            CpuModel::HiSiliconHip12 => "hisilicon-hip12",
        }
    }

    pub fn from_name(name: &str) -> Option<CpuModel> {
        let n = name.trim().to_ascii_lowercase().replace('_', "-");
        CpuModel::ALL.iter().copied().find(|m| m.name() == n)
    }
}

impl fmt::Display for CpuModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_models() {
        // Ampere Altra (Neoverse N1 r3p1): MIDR 0x413fd0c1.
        let m = Midr::parse("0x413fd0c1").unwrap();
        assert_eq!(
            (m.implementer(), m.variant(), m.part(), m.revision()),
            (0x41, 3, 0xd0c, 1)
        );
        assert_eq!(m.model(), Some(CpuModel::NeoverseN1));
        assert_eq!(
            Midr::parse("0x6d0fd493").unwrap().model(),
            Some(CpuModel::AzureCobalt100)
        );
        assert_eq!(CpuModel::NeoverseN1.midr(), Midr(0x410fd0c0));
        assert_eq!(Midr::parse("0x12345678").unwrap().model(), None);
        for m in CpuModel::ALL {
            assert_eq!(CpuModel::from_name(m.name()), Some(m));
            assert_eq!(m.midr().model(), Some(m));
        }
    }
}
