//! Kernel code addresses to kernel functions, from a `/proc/kallsyms`-format file.
//!
//! Format (one symbol per line, proc(5)): `ADDRESS TYPE NAME [MODULE]`, the address in hex, the
//! type a `nm` letter (`t`/`T` for text). A kernel PC belongs to the text symbol with the
//! greatest address not above it. Files read without privileges list every address as 0; such
//! a file is refused (it would name every PC wrongly).

use std::sync::Arc;

/// One kernel text symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSymbol {
    pub address: u64,
    pub name: Arc<str>,
    /// The module (`[ext4]`), or None for the kernel image.
    pub module: Option<Arc<str>>,
}

/// Kernel text symbols sorted by address.
#[derive(Clone, Debug, Default)]
pub struct KernelSymbols {
    symbols: Vec<KernelSymbol>,
}

/// Why a kallsyms file cannot be used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum KallsymsError {
    #[error("no text symbols (not a kallsyms file?)")]
    Empty,
    #[error("every address is 0 (read without root privileges: kernel.kptr_restrict)")]
    Restricted,
    #[error("line {line}: expected 'ADDRESS TYPE NAME [MODULE]'")]
    Malformed { line: usize },
}

impl KernelSymbols {
    pub fn parse(text: &str) -> Result<KernelSymbols, KallsymsError> {
        let mut symbols = Vec::new();
        let mut zero = 0usize;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let mut f = line.split_whitespace();
            let (Some(addr), Some(ty), Some(name)) = (f.next(), f.next(), f.next()) else {
                return Err(KallsymsError::Malformed { line: i + 1 });
            };
            let Ok(address) = u64::from_str_radix(addr, 16) else {
                return Err(KallsymsError::Malformed { line: i + 1 });
            };
            if !matches!(ty, "t" | "T" | "w" | "W") {
                continue;
            }
            if address == 0 {
                zero += 1;
                continue;
            }
            let module = f
                .next()
                .map(|m| Arc::from(m.trim_start_matches('[').trim_end_matches(']')));
            symbols.push(KernelSymbol {
                address,
                name: Arc::from(name),
                module,
            });
        }
        if symbols.is_empty() {
            return Err(if zero > 0 {
                KallsymsError::Restricted
            } else {
                KallsymsError::Empty
            });
        }
        symbols.sort_by_key(|s| s.address);
        Ok(KernelSymbols { symbols })
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The symbol containing `pc` and the offset into it.
    pub fn lookup(&self, pc: u64) -> Option<(&KernelSymbol, u64)> {
        let i = self.symbols.partition_point(|s| s.address <= pc);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        Some((s, pc - s.address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
ffff800008010000 T _text
ffff800008010000 t __efistub__text
ffff800008011000 T do_page_fault
ffff800008011800 t handle_mm_fault
ffff800008020000 D some_data
ffff800009000000 t ext4_readdir\t[ext4]
";

    #[test]
    fn nearest_lower_text_symbol() {
        let k = KernelSymbols::parse(SAMPLE).unwrap();
        let (s, off) = k.lookup(0xffff_8000_0801_1804).unwrap();
        assert_eq!((&*s.name, off), ("handle_mm_fault", 4));
        let (s, off) = k.lookup(0xffff_8000_0801_1000).unwrap();
        assert_eq!((&*s.name, off), ("do_page_fault", 0));
        let (s, _) = k.lookup(0xffff_8000_0900_0010).unwrap();
        assert_eq!(s.module.as_deref(), Some("ext4"));
        assert!(k.lookup(0xffff_8000_0800_0000).is_none());
        // Data symbols are not code.
        let (s, _) = k.lookup(0xffff_8000_0802_0008).unwrap();
        assert_eq!(&*s.name, "handle_mm_fault");
    }

    #[test]
    fn restricted_and_bad_files_are_refused() {
        assert_eq!(
            KernelSymbols::parse("0000000000000000 T _text\n0000000000000000 T x\n").unwrap_err(),
            KallsymsError::Restricted
        );
        assert_eq!(
            KernelSymbols::parse("hello\n").unwrap_err(),
            KallsymsError::Malformed { line: 1 }
        );
        assert_eq!(KernelSymbols::parse("").unwrap_err(), KallsymsError::Empty);
    }
}
