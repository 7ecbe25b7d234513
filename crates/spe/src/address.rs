//! Address packet payloads, kept raw and read through accessors.
//!
//! Provenance: Arm ARM (DDI 0487), SPE "Address packet" payload formats:
//! - instruction virtual address / branch target / previous branch target: address in
//!   bits \[55:0\], NS bit 63, exception level bits \[62:61\], NSE bit 60 (FEAT_RME);
//! - data virtual address: address in bits \[55:0\], top-byte tag in bits \[63:56\];
//! - data physical address: address in bits \[55:0\], NS bit 63, CH (checked access) bit 62,
//!   physical address tag (PAT) in bits \[59:56\].

const ADDR_MASK: u64 = (1 << 56) - 1;

/// Sign-extends a 56-bit virtual address from bit 55 (kernel addresses become `0xffff...`).
#[inline]
pub const fn canonical_va(addr56: u64) -> u64 {
    if addr56 & (1 << 55) != 0 {
        addr56 | !ADDR_MASK
    } else {
        addr56 & ADDR_MASK
    }
}

/// A code address: PC, branch target or previous branch target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CodeAddress(pub u64);

impl CodeAddress {
    /// Builds a payload from a virtual address, exception level and NS bit.
    pub const fn new(va: u64, el: u8, ns: bool) -> Self {
        CodeAddress((va & ADDR_MASK) | ((el as u64 & 0b11) << 61) | ((ns as u64) << 63))
    }
    /// The 56-bit address field as recorded.
    pub const fn raw_addr(self) -> u64 {
        self.0 & ADDR_MASK
    }
    /// The virtual address, sign-extended from bit 55.
    pub const fn va(self) -> u64 {
        canonical_va(self.0 & ADDR_MASK)
    }
    /// Exception level the instruction executed at (0–3).
    pub const fn el(self) -> u8 {
        ((self.0 >> 61) & 0b11) as u8
    }
    pub const fn ns(self) -> bool {
        self.0 >> 63 != 0
    }
    pub const fn nse(self) -> bool {
        (self.0 >> 60) & 1 != 0
    }
}

/// The virtual address of a data access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DataVirtualAddress(pub u64);

impl DataVirtualAddress {
    pub const fn new(va: u64, tag: u8) -> Self {
        DataVirtualAddress((va & ADDR_MASK) | ((tag as u64) << 56))
    }
    pub const fn raw_addr(self) -> u64 {
        self.0 & ADDR_MASK
    }
    /// The virtual address, sign-extended from bit 55.
    pub const fn va(self) -> u64 {
        canonical_va(self.0 & ADDR_MASK)
    }
    /// Top-byte tag (bits \[63:56\]).
    pub const fn tag(self) -> u8 {
        (self.0 >> 56) as u8
    }
}

/// The physical address of a data access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DataPhysicalAddress(pub u64);

impl DataPhysicalAddress {
    pub const fn new(pa: u64, ns: bool, ch: bool, pat: u8) -> Self {
        DataPhysicalAddress(
            (pa & ADDR_MASK)
                | ((ns as u64) << 63)
                | ((ch as u64) << 62)
                | (((pat & 0xf) as u64) << 56),
        )
    }
    pub const fn pa(self) -> u64 {
        self.0 & ADDR_MASK
    }
    pub const fn ns(self) -> bool {
        self.0 >> 63 != 0
    }
    /// Checked access (MTE tag check performed).
    pub const fn ch(self) -> bool {
        (self.0 >> 62) & 1 != 0
    }
    /// Physical address tag (bits \[59:56\]).
    pub const fn pat(self) -> u8 {
        ((self.0 >> 56) & 0xf) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        // Oracle vector "b0 5c 8b 8c 86 c2 c0 ff c0" -> PC 0xffc0c2868c8b5c el2 ns=1.
        let pc = CodeAddress(0xc0ff_c0c2_868c_8b5c);
        assert_eq!(pc.raw_addr(), 0xffc0c2868c8b5c);
        assert_eq!(pc.el(), 2);
        assert!(pc.ns());
        assert_eq!(pc.va(), 0xffff_c0c2_868c_8b5c);
        assert_eq!(CodeAddress::new(0xffc0c2868c8b5c, 2, true), pc);
        let pa = DataPhysicalAddress(0x8000_080b_d88a_09e8);
        assert_eq!(
            (pa.pa(), pa.ns(), pa.ch(), pa.pat()),
            (0x80bd88a09e8, true, false, 0)
        );
        let va = DataVirtualAddress(0x5a00_aaaa_e65d_da43);
        assert_eq!((va.va(), va.tag()), (0xaaaae65dda43, 0x5a));
    }
}
