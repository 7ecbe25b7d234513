//! The ring reader against the running kernel: a software `dummy` event (every Linux has it, no
//! PMU needed) on a child that execs `true`. The kernel's own COMM, MMAP2 and EXIT records must
//! come out of the ring whole, typed, with the child's pid (what the hardware SPE recorder
//! reads, minus the AUX area, which needs an AUX-capable PMU: the arm64 VM test covers that).

use spelunk_perf::abi::{attr_flag, event_type, sample};
use spelunk_perf::counting::StoppedChild;
use spelunk_perf::ring::{EventFd, MappedRing};
use spelunk_perf::{EventAttr, SidebandRecord};

fn dummy_attr() -> EventAttr {
    EventAttr::new(
        event_type::SOFTWARE,
        event_type::SW_DUMMY,
        1,
        sample::TID | sample::TIME | sample::CPU | sample::IDENTIFIER,
        attr_flag::DISABLED
            | attr_flag::ENABLE_ON_EXEC
            | attr_flag::EXCLUDE_KERNEL
            | attr_flag::EXCLUDE_HV
            | attr_flag::MMAP
            | attr_flag::COMM
            | attr_flag::TASK
            | attr_flag::SAMPLE_ID_ALL
            | attr_flag::MMAP2
            | attr_flag::COMM_EXEC,
    )
}

#[test]
fn kernel_sideband_records_come_out_of_the_ring_typed() {
    let attr = dummy_attr();
    let mut child = StoppedChild::spawn(&["true".to_string()]).unwrap();
    let fd = match EventFd::open(&attr.to_bytes(), child.pid(), -1) {
        Ok(fd) => fd,
        Err(e) => {
            // Not a result: say why the live path could not run here.
            eprintln!("SKIP: perf_event_open of a software dummy event failed: {e}");
            let _ = child.wait();
            return;
        }
    };
    let mut ring = MappedRing::map(fd.raw(), 8, 0).unwrap();
    let id = fd.id().unwrap();
    child.release().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    let mut recs = Vec::new();
    ring.drain(&mut recs).unwrap();
    let pid = child.pid();
    let mut comm = None;
    let mut mmaps = Vec::new();
    let mut exit = false;
    for (i, r) in recs.iter().enumerate() {
        match r.parse(&attr, i as u64).unwrap() {
            Some(SidebandRecord::Comm(c)) => {
                assert_eq!(c.sample.id, Some(id), "IDENTIFIER is the event's id");
                comm = Some(c)
            }
            Some(SidebandRecord::Mmap(m)) => mmaps.push(m),
            Some(SidebandRecord::Task(t)) => exit |= t.pid == pid,
            _ => {}
        }
    }
    let comm = comm.expect("a COMM record at exec");
    assert_eq!((comm.pid, comm.tid, comm.name.as_str()), (pid, pid, "true"));
    assert!(comm.exec);
    assert!(comm.sample.time_ns.is_some_and(|t| t > 0));
    assert!(
        mmaps
            .iter()
            .any(|m| m.mmap2 && m.pid == pid && m.executable && m.path.ends_with("/true")),
        "an executable MMAP2 of the program: {mmaps:?}"
    );
    assert!(exit, "an EXIT record of the child");
    // Drained: nothing more.
    let mut again = Vec::new();
    assert_eq!(ring.drain(&mut again).unwrap(), 0);
}
