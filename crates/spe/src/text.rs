//! Perf-style one-line text for packets (`PC 0x7ffdbf2143e0 el0 ns=1`, `LAT 39 ISSUE`, ...), the
//! form used by `perf report -D` and by Arm spe-parser's test oracles. Addresses print the raw
//! 56-bit field, as those tools' oracles do; spelunk's typed outputs use sign-extended VAs.

use crate::address::{CodeAddress, DataPhysicalAddress, DataVirtualAddress};
use crate::events::Events;
use crate::op::OpType;
use crate::packet::{address_index, counter_index, Packet};
use core::fmt;

impl fmt::Display for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Packet::Pad => f.write_str("PAD"),
            Packet::End => f.write_str("END"),
            Packet::Timestamp(ts) => write!(f, "TS {ts}"),
            Packet::Events { bits, .. } => write!(f, "{}", Events(bits)),
            Packet::DataSource { value, .. } => write!(f, "DATA-SOURCE {value}"),
            Packet::Context { index, id } => write!(f, "CONTEXT 0x{id:x} el{}", index + 1),
            Packet::OpType { class, payload } => {
                write!(f, "{}", OpType { class, payload }.operation())
            }
            Packet::Address { index, payload, .. } => {
                let code = |name: &str, f: &mut fmt::Formatter<'_>| {
                    let a = CodeAddress(payload);
                    write!(
                        f,
                        "{name} 0x{:x} el{} ns={}",
                        a.raw_addr(),
                        a.el(),
                        a.ns() as u8
                    )
                };
                match index {
                    address_index::PC => code("PC", f),
                    address_index::BRANCH_TARGET => code("TGT", f),
                    address_index::PREV_BRANCH_TARGET => code("PBT", f),
                    address_index::DATA_VIRTUAL => {
                        let a = DataVirtualAddress(payload);
                        write!(f, "VA 0x{:x}", a.raw_addr())?;
                        if a.tag() != 0 {
                            write!(f, " tag=0x{:02x}", a.tag())?;
                        }
                        Ok(())
                    }
                    address_index::DATA_PHYSICAL => {
                        let a = DataPhysicalAddress(payload);
                        write!(
                            f,
                            "PA 0x{:x} ns={} ch={} pat={}",
                            a.pa(),
                            a.ns() as u8,
                            a.ch() as u8,
                            a.pat()
                        )
                    }
                    _ => write!(f, "ADDR idx={index} 0x{payload:x}"),
                }
            }
            Packet::Counter { index, value, .. } => match index {
                counter_index::TOTAL_LATENCY => write!(f, "LAT {value} TOT"),
                counter_index::ISSUE_LATENCY => write!(f, "LAT {value} ISSUE"),
                counter_index::TRANSLATION_LATENCY => write!(f, "LAT {value} XLAT"),
                _ => write!(f, "LAT {value} idx={index}"),
            },
        }
    }
}
