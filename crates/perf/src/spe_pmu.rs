//! The SPE PMUs a kernel exposes, read from sysfs: `/sys/bus/event_source/devices/arm_spe_N/`
//! with `type`, `cpumask`, `caps/*` and `format/*` (kernel ABI: drivers/perf/arm_spe_pmu.c's
//! sysfs attributes, Documentation/ABI; facts collected in docs/check.md).
//!
//! Nothing is hard-coded: each `format/` file says which `perf_event_attr` config word and bits
//! a field uses (`config:0`, `config:32`, `config1:0-63`, `config2:0-11`), and fields a kernel or
//! core lacks are simply absent. The recorder maps its options through [`SpePmu::field`].

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Which `perf_event_attr` word a format field lives in.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ConfigWord {
    Config,
    Config1,
    Config2,
    Config3,
    Config4,
}

impl ConfigWord {
    pub fn name(self) -> &'static str {
        match self {
            ConfigWord::Config => "config",
            ConfigWord::Config1 => "config1",
            ConfigWord::Config2 => "config2",
            ConfigWord::Config3 => "config3",
            ConfigWord::Config4 => "config4",
        }
    }
}

/// A `format/` field: bits `lo..=hi` of one config word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct FormatField {
    pub word: ConfigWord,
    pub lo: u8,
    pub hi: u8,
}

impl FormatField {
    /// Parses a `format/` file's text: `config:0`, `config1:0-63`.
    pub fn parse(text: &str) -> Option<FormatField> {
        let (word, bits) = text.trim().split_once(':')?;
        let word = match word {
            "config" => ConfigWord::Config,
            "config1" => ConfigWord::Config1,
            "config2" => ConfigWord::Config2,
            "config3" => ConfigWord::Config3,
            "config4" => ConfigWord::Config4,
            _ => return None,
        };
        let (lo, hi) = match bits.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let b = bits.parse().ok()?;
                (b, b)
            }
        };
        (lo <= hi && hi < 64).then_some(FormatField { word, lo, hi })
    }

    /// The field's width in bits.
    pub fn width(self) -> u32 {
        u32::from(self.hi - self.lo) + 1
    }

    /// `value` placed in the field: (word, bits to OR in); None when it does not fit.
    pub fn encode(self, value: u64) -> Option<(ConfigWord, u64)> {
        let w = self.width();
        if w < 64 && value >> w != 0 {
            return None;
        }
        Some((self.word, value << self.lo))
    }

    /// `config:0-11` as the kernel writes it.
    pub fn describe(self) -> String {
        if self.lo == self.hi {
            format!("{}:{}", self.word.name(), self.lo)
        } else {
            format!("{}:{}-{}", self.word.name(), self.lo, self.hi)
        }
    }
}

/// One `arm_spe_N` PMU.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct SpePmu {
    pub name: String,
    /// `perf_event_attr.type`.
    pub perf_type: u32,
    /// CPUs the PMU samples on (`cpumask`).
    pub cpus: Vec<u32>,
    /// `caps/*`, by file name (`arch_inst`, `count_size`, `ernd`, `min_interval`, ...).
    pub caps: BTreeMap<String, String>,
    /// `format/*`, by field name.
    pub format: BTreeMap<String, FormatField>,
    /// format files whose text was not understood (name, text), kept to report.
    pub unknown_format: Vec<(String, String)>,
}

impl SpePmu {
    pub fn field(&self, name: &str) -> Option<FormatField> {
        self.format.get(name).copied()
    }

    /// `caps/min_interval` as a number.
    pub fn min_interval(&self) -> Option<u64> {
        self.caps.get("min_interval")?.trim().parse().ok()
    }
}

/// Why the SPE PMUs could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {what}")]
pub struct SpePmuError {
    pub path: PathBuf,
    pub what: String,
}

/// Parses a kernel CPU list (`cpumask`, `cpus`: `0-3,8,10-11`), sorted and without repeats.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    let s = s.trim();
    if s.is_empty() {
        return Some(out);
    }
    for part in s.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 65_536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

fn read_small(p: &Path) -> Option<String> {
    let bytes = spelunk_fsio::read_bounded(p, 64 << 10).ok()?;
    String::from_utf8(bytes).ok()
}

/// Every `arm_spe_*` PMU under `devices` (`/sys/bus/event_source/devices` on a live machine),
/// by name. A directory that is missing means none; a PMU whose `type` cannot be read is an
/// error naming the file.
pub fn spe_pmus(devices: &Path) -> Result<Vec<SpePmu>, SpePmuError> {
    let Ok(rd) = fs::read_dir(devices) else {
        return Ok(Vec::new());
    };
    let mut dirs: Vec<(String, PathBuf)> = rd
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(n, _)| n.starts_with("arm_spe_"))
        .collect();
    dirs.sort();
    let mut out = Vec::new();
    for (name, dir) in dirs {
        let type_path = dir.join("type");
        let perf_type = read_small(&type_path)
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| SpePmuError {
                path: type_path.clone(),
                what: "unreadable, or not a number".into(),
            })?;
        let cpus = read_small(&dir.join("cpumask"))
            .and_then(|s| parse_cpu_list(&s))
            .unwrap_or_default();
        let mut caps = BTreeMap::new();
        if let Ok(rd) = fs::read_dir(dir.join("caps")) {
            for e in rd.flatten() {
                if let Some(v) = read_small(&e.path()) {
                    caps.insert(
                        e.file_name().to_string_lossy().into_owned(),
                        v.trim().into(),
                    );
                }
            }
        }
        let mut format = BTreeMap::new();
        let mut unknown_format = Vec::new();
        if let Ok(rd) = fs::read_dir(dir.join("format")) {
            for e in rd.flatten() {
                let field = e.file_name().to_string_lossy().into_owned();
                let text = read_small(&e.path()).unwrap_or_default();
                match FormatField::parse(&text) {
                    Some(f) => {
                        format.insert(field, f);
                    }
                    None => unknown_format.push((field, text.trim().to_string())),
                }
            }
        }
        unknown_format.sort();
        out.push(SpePmu {
            name,
            perf_type,
            cpus,
            caps,
            format,
            unknown_format,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_fields_parse_as_the_kernel_writes_them() {
        let f = FormatField::parse("config:0\n").unwrap();
        assert_eq!(
            (f.word, f.lo, f.hi, f.width()),
            (ConfigWord::Config, 0, 0, 1)
        );
        let f = FormatField::parse("config2:0-11").unwrap();
        assert_eq!(
            (f.word, f.lo, f.hi, f.width()),
            (ConfigWord::Config2, 0, 11, 12)
        );
        assert_eq!(f.encode(100), Some((ConfigWord::Config2, 100)));
        assert_eq!(f.encode(4096), None, "12 bits hold at most 4095");
        let f = FormatField::parse("config:32").unwrap();
        assert_eq!(f.encode(1), Some((ConfigWord::Config, 1 << 32)));
        let f = FormatField::parse("config1:0-63").unwrap();
        assert_eq!(f.encode(u64::MAX), Some((ConfigWord::Config1, u64::MAX)));
        assert_eq!(f.describe(), "config1:0-63");
        for bad in [
            "",
            "config",
            "config5:1",
            "config:9-2",
            "config:64",
            "cfg:1",
        ] {
            assert_eq!(FormatField::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}
